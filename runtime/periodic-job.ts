import type { Clock, Timer } from './clock.ts';
import type { Logger } from './logger.ts';

export interface PeriodicJob {
  /** Stops the timer and waits for a run in progress. */
  stop(): Promise<void>;
  /** Runs once now (or joins the run waiting to start); resolves when it has ended. */
  runNow(): Promise<void>;
}

/**
 * Runs `task` every `intervalMs` on the service clock, one run at a time. A failed run is logged as a
 * warning and the next interval tries again; runs that fall due while one waits to start are one run (a
 * clock moved by days fires many at once).
 */
export function startPeriodicJob(clock: Clock, logger: Logger, name: string, intervalMs: number, task: () => Promise<void>): PeriodicJob {
  let timer: Timer | undefined;
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let queued = false;
  const run = () => {
    if (queued) return running;
    queued = true;
    running = running.then(async () => {
      queued = false;
      if (stopped) return;
      try {
        await task();
      } catch (error) {
        logger.warn({ err: error }, `${name} failed; it runs again at the next interval`);
      }
    });
    return running;
  };
  const arm = () => {
    timer = clock.setTimer(() => {
      void run();
      if (!stopped) arm();
    }, intervalMs);
  };
  arm();
  return {
    async stop() {
      stopped = true;
      timer?.cancel();
      await running;
    },
    runNow: run,
  };
}

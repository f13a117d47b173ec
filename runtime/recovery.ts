import type { Logger } from './logger.ts';

/** A start-up step that brings back what must resume: non-terminal generations, pending deliveries… */
export interface RecoveryTask {
  name: string;
  run(): Promise<number>;
}

/** Runs every task in order; the service reports ready only once all have finished. */
export async function runRecovery(tasks: RecoveryTask[], logger: Logger): Promise<void> {
  for (const task of tasks) {
    const started = performance.now();
    const resumed = await task.run();
    logger.info({ task: task.name, resumed, ms: Math.round(performance.now() - started) }, 'recovered');
  }
}

import { type Clock, systemClock } from '../runtime/clock.ts';

/**
 * Events of jobs whose submission's answer was lost (the provider took the job, the service did not learn its
 * id before a restart), found by the job's own id in the webhook URL (providers/event-job.ts): kept for the
 * job's next hand-over, which adopts the provider's job instead of submitting it again. At most `max` are
 * kept, none longer than `keepMs`; a hand-over waiting for its job's event is woken when it comes.
 */
export class UnclaimedEvents<T> {
  private readonly held = new Map<string, { value: T; at: number }>();
  private readonly waiting = new Map<string, () => void>();

  constructor(private readonly options: { keepMs: number; max: number; now: () => number; closing: AbortSignal; clock?: Pick<Clock, 'setTimer'> }) {}

  /** Keeps `value` for the job (over what it held, unless `replaces` says the held one stays) and wakes its hand-over. */
  hold(jobId: string, value: T, replaces: (held: T) => boolean = () => true): void {
    const now = this.options.now();
    const old = this.held.get(jobId);
    if (!old || replaces(old.value)) {
      this.held.delete(jobId);
      this.held.set(jobId, { value, at: now });
    }
    // Oldest first: past the bound or the time kept, they go.
    for (const [key, kept] of this.held) {
      if (this.held.size <= this.options.max && now - kept.at <= this.options.keepMs) break;
      this.held.delete(key);
    }
    this.waiting.get(jobId)?.();
  }

  /** Waits up to `ms` (or until `signal` aborts) for an event of the job; returns it (taken: a job adopts it once), or undefined when none came. */
  async take(jobId: string, ms: number, signal?: AbortSignal): Promise<T | undefined> {
    if (!(await this.within(jobId, ms, signal))) return undefined;
    const held = this.held.get(jobId);
    this.held.delete(jobId);
    return held?.value;
  }

  /** The event held for the job, taken, without waiting. */
  takeNow(jobId: string): T | undefined {
    const held = this.held.get(jobId);
    this.held.delete(jobId);
    return held?.value;
  }

  clear(): void {
    this.held.clear();
  }

  private within(jobId: string, ms: number, signal?: AbortSignal): Promise<boolean> {
    const stop = signal ? AbortSignal.any([this.options.closing, signal]) : this.options.closing;
    return new Promise((resolve) => {
      if (stop.aborted) return resolve(false);
      if (this.held.has(jobId)) return resolve(true);
      const done = (came: boolean) => {
        timer.cancel();
        stop.removeEventListener('abort', onStop);
        this.waiting.delete(jobId);
        resolve(came);
      };
      const onStop = () => done(false);
      const timer = (this.options.clock ?? systemClock).setTimer(() => done(this.held.has(jobId)), ms);
      stop.addEventListener('abort', onStop, { once: true });
      this.waiting.set(jobId, () => done(true));
    });
  }
}

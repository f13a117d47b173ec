import type { ManualClock } from '../../runtime/clock.ts';

export interface EventuallyOptions {
  /** How long to keep trying before failing (default 10 s). */
  timeoutMs?: number;
  /** Pause between two tries (default 10 ms). */
  everyMs?: number;
  /** Named in the error when the time runs out. */
  what?: string;
}

/** What `eventually` throws when the time runs out (an error of `check` itself is thrown as it is). */
export class NotMetError extends Error {}

/**
 * The one polling wait of the tests, for a condition that a real process, socket or database makes true in
 * its own time: calls `check` until it returns a value other than undefined or false, and returns that value.
 * An error thrown by `check` fails at once (never retried: a transient failure is something to catch). The
 * timeout is a bound against hanging, never a pass condition. Time the service itself measures is moved with
 * a ManualClock (advanceUntil below), not waited for.
 */
export async function eventually<T>(check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Exclude<T, undefined | false>> {
  const { timeoutMs = 10_000, everyMs = 10, what } = options;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value as Exclude<T, undefined | false>;
    if (performance.now() >= deadline) throw new NotMetError(`${what ?? 'the condition'}: not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Like eventually, for reports rather than assertions: whether `check` came true before the deadline (a time, ms since the epoch). */
export async function cameTrue(check: () => boolean | Promise<boolean>, deadline: number, everyMs = 10): Promise<boolean> {
  try {
    return await eventually(check, { timeoutMs: Math.max(0, deadline - Date.now()), everyMs });
  } catch (error) {
    if (error instanceof NotMetError) return false;
    throw error;
  }
}

/**
 * Moves a manual clock forward stepMs at a time, letting the event loop run between steps, until `work`
 * settles; returns its value. For code that awaits I/O between the waits it takes on the clock (a drain, a
 * retry loop): time passes only as fast as that code gets to its next wait. Fails after maxMs of clock time.
 */
export async function advanceUntil<T>(clock: ManualClock, work: Promise<T>, options: { stepMs?: number; maxMs?: number } = {}): Promise<T> {
  const { stepMs = 10, maxMs = 600_000 } = options;
  let settled = false;
  const watched = work.finally(() => {
    settled = true;
  });
  watched.catch(() => {});
  for (let moved = 0; !settled; moved += stepMs) {
    if (moved > maxMs) throw new Error(`still running after the clock moved ${maxMs} ms`);
    await new Promise((resolve) => setImmediate(resolve));
    if (!settled) clock.advance(stepMs);
  }
  return watched;
}

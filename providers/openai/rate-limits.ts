import { RateLimitError } from 'openai/error';
import type { AdapterJob } from '../adapter.ts';
import type { CallContext } from '../follower.ts';
import { rateLimitBackoffMs } from '../upstream-http.ts';
import { rateLimitWaitMs } from './failures.ts';
import type { OpenAiNotes } from './notes.ts';

/** The first backoff after a 429 that asks for no wait (doubling, with jitter: providers/upstream-http.ts). */
const RATE_LIMIT_BASE_MS = 1_000;

/**
 * Calls `call` again after each 429 (not for insufficient_quota), waiting on the follower's clock what OpenAI
 * asks or else rateLimitBackoffMs, for at most `maxAttempts` calls and while the wait ends before the
 * deadline; then the 429 is the job's failure (provider_rate_limited, which the router may send on). The
 * 429 being waited out is in the job's notes until a call answers.
 */
export async function waitingOutRateLimits<T>(
  job: AdapterJob,
  notes: OpenAiNotes,
  on: CallContext,
  limits: { maxAttempts: number; now(): number },
  call: () => Promise<T>,
): Promise<T> {
  let limited: RateLimitError | undefined;
  for (let calls = 1; ; calls++) {
    try {
      const answer = await call();
      notes.limited = undefined;
      return answer;
    } catch (error) {
      // A call after a wait that the deadline overtook (the wait ended just before it, the call did not):
      // the job spent its time waiting out 429s, and fails as rate limited, not as timed out.
      if (limited && !(error instanceof RateLimitError) && limits.now() >= job.deadline) throw limited;
      if (!(error instanceof RateLimitError)) throw error;
      limited = error;
      // What OpenAI asks for (retry-after-ms, Retry-After: it says to the millisecond); without either, backoff
      // with jitter, as every adapter waits (providers/upstream-http.ts).
      const asked = rateLimitWaitMs(error, limits.now(), 0);
      if (asked === undefined || calls >= limits.maxAttempts) throw error;
      const wait = asked > 0 ? asked : rateLimitBackoffMs(calls, RATE_LIMIT_BASE_MS, undefined);
      if (limits.now() + wait >= job.deadline || on.signal.aborted) throw error;
      notes.limited = error;
      on.say(`OpenAI answered 429 (rate limited); trying again in ${wait} ms.`);
      await on.wait(wait);
      if (on.signal.aborted || limits.now() >= job.deadline) throw error;
    }
  }
}

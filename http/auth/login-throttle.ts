import type { Clock } from '../../runtime/clock.ts';
import { ApiError } from '../errors.ts';
import { secondsUntil, type RateLimiter } from './limiter.ts';

/** Failed logins allowed per window, per account e-mail and per remote address, before 429. */
export const LOGIN_THROTTLE = { windowMs: 15 * 60_000, perAccount: 10, perAddress: 50 } as const;

const accountKey = (email: string) => `login-fail:acct:${email}`;
const addressKey = (address: string) => `login-fail:addr:${address}`;

/** Refuses a login attempt (429 with Retry-After) while the account or the address is over its failure budget. */
export async function assertLoginAllowed(limiter: RateLimiter, clock: Clock, email: string, address: string): Promise<void> {
  const [account, remote] = await Promise.all([
    limiter.peek(accountKey(email), LOGIN_THROTTLE.perAccount, LOGIN_THROTTLE.windowMs),
    limiter.peek(addressKey(address), LOGIN_THROTTLE.perAddress, LOGIN_THROTTLE.windowMs),
  ]);
  const blocked = [account, remote].filter((w) => w.remaining === 0);
  if (blocked.length === 0) return;
  const resetAt = Math.max(...blocked.map((w) => w.resetAt));
  throw new ApiError('rate_limited', 'Too many failed sign-in attempts; try again later.', { 'Retry-After': String(secondsUntil(resetAt, clock.now())) });
}

export async function recordLoginFailure(limiter: RateLimiter, email: string, address: string): Promise<void> {
  await Promise.all([
    limiter.hit(accountKey(email), LOGIN_THROTTLE.perAccount, LOGIN_THROTTLE.windowMs),
    limiter.hit(addressKey(address), LOGIN_THROTTLE.perAddress, LOGIN_THROTTLE.windowMs),
  ]);
}

/** A successful login clears its account's failures (not its address's). */
export async function clearAccountFailures(limiter: RateLimiter, email: string): Promise<void> {
  await limiter.reset(accountKey(email), LOGIN_THROTTLE.windowMs);
}

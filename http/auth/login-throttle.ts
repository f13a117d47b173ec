import ipaddr from 'ipaddr.js';
import type { Clock } from '../../runtime/clock.ts';
import { ApiError } from '../errors.ts';
import { secondsUntil, type RateLimiter } from './limiter.ts';
import { AttemptContentionError, type AttemptChange, type AttemptRecord, type AttemptStore } from './attempt-store.ts';

/**
 * Password guessing is throttled so that nobody can lock an account's owner out (docs/auth-and-keys.md "Login
 * throttling"):
 *
 * - Per account and address: `freeFailures` attempts without waiting, then each further attempt waits
 *   `firstWaitMs` after the last one, doubled with each attempt, up to `maxWaitMs`. Attempts are counted
 *   when they start (so concurrent guesses cannot all slip through before one of them fails) and forgotten
 *   at a success from that address, or `forgetAfterMs` after the last one.
 * - Per address, across accounts: `perAddress` failures per window, then the address waits for the next
 *   window (one address spraying many accounts).
 * - Per account, across addresses: past `perAccount` failures in a window the account is under attack from
 *   many addresses. Until the window ends, an address that has failed for this account in the window may
 *   not try again; an address without such failures still may, so the owner, from their own address, gets
 *   in. A botnet gets one guess per address per window instead of its free attempts and waits.
 *
 * A throttled attempt is refused before the password is checked: 429 rate_limited with Retry-After.
 * The address is the client's as the socket sees it (see throttledAddress).
 */
export const LOGIN_THROTTLE = {
  freeFailures: 5,
  firstWaitMs: 1_000,
  maxWaitMs: 15 * 60_000,
  forgetAfterMs: 24 * 3600_000,
  windowMs: 15 * 60_000,
  perAddress: 50,
  perAccount: 20,
} as const;

/** What the throttle uses of the services. */
export interface LoginThrottleDeps {
  limiter: RateLimiter;
  loginAttempts: AttemptStore;
  clock: Clock;
}

/** An attempt allowed to check a password: say how it went. */
export interface LoginAttempt {
  failed(): Promise<void>;
  succeeded(): Promise<void>;
}

const accountKey = (email: string) => `login-fail:acct:${email}`;
const addressKey = (address: string) => `login-fail:addr:${address}`;
// The address first: it holds no '|', so the key is unambiguous whatever the e-mail holds.
const pairKey = (email: string, address: string) => `login:${address}|${email}`;

/**
 * The address attempts are counted against: an IPv4 address as is (also when the socket shows it
 * IPv4-mapped), an IPv6 address by its /64 prefix, since one client commonly holds a whole /64 and could
 * otherwise start afresh from each of its addresses.
 */
export function throttledAddress(remote: string): string {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.process(remote);
  } catch {
    return remote;
  }
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4);
  return `${new ipaddr.IPv6([...parts, 0, 0, 0, 0]).toString()}/64`;
}

/** Until when the next attempt after `record` must wait; 0 when it need not. */
export function waitUntil(record: AttemptRecord | undefined): number {
  if (!record || record.count < LOGIN_THROTTLE.freeFailures) return 0;
  const doublings = record.count - LOGIN_THROTTLE.freeFailures;
  return record.last + Math.min(LOGIN_THROTTLE.firstWaitMs * 2 ** Math.min(doublings, 40), LOGIN_THROTTLE.maxWaitMs);
}

export type AttemptVerdict = { allowed: true } | { allowed: false; retryAt: number };

/**
 * The pure rule for one account and address: whether an attempt at `now` may go on, and the record it
 * leaves (counted when allowed, unchanged when refused). `underAttack` is the current window of an account
 * over its ceiling: an address whose last attempt falls in it waits for its end.
 */
export function decideAttempt(current: AttemptRecord | undefined, now: number, underAttack?: { start: number; end: number }): AttemptChange<AttemptVerdict> {
  const record = current && current.last + LOGIN_THROTTLE.forgetAfterMs > now ? current : undefined;
  let retryAt = waitUntil(record);
  if (underAttack && record && record.count > 0 && record.last >= underAttack.start) retryAt = Math.max(retryAt, underAttack.end);
  if (retryAt > now) return { result: { allowed: false, retryAt } };
  return { next: { count: (record?.count ?? 0) + 1, last: now }, result: { allowed: true } };
}

/**
 * Starts a password check for `email` from `address`, or refuses it (429 rate_limited with Retry-After).
 * The caller then reports the outcome on the returned attempt.
 */
export async function beginLoginAttempt(deps: LoginThrottleDeps, email: string, remoteAddress: string): Promise<LoginAttempt> {
  const address = throttledAddress(remoteAddress);
  const { limiter, loginAttempts, clock } = deps;
  const [fromAddress, forAccount] = await Promise.all([
    limiter.peek(addressKey(address), LOGIN_THROTTLE.perAddress, LOGIN_THROTTLE.windowMs),
    limiter.peek(accountKey(email), LOGIN_THROTTLE.perAccount, LOGIN_THROTTLE.windowMs),
  ]);
  if (fromAddress.remaining === 0) throw throttled(fromAddress.resetAt, clock);
  const now = clock.now();
  const underAttack = forAccount.remaining === 0 ? { start: forAccount.resetAt - LOGIN_THROTTLE.windowMs, end: forAccount.resetAt } : undefined;
  const key = pairKey(email, address);
  let verdict: AttemptVerdict;
  try {
    verdict = await loginAttempts.update(key, LOGIN_THROTTLE.forgetAfterMs, (current) => decideAttempt(current, now, underAttack));
  } catch (error) {
    if (error instanceof AttemptContentionError) throw throttled(now + 1_000, clock);
    throw error;
  }
  if (!verdict.allowed) throw throttled(verdict.retryAt, clock);
  return {
    async failed() {
      await Promise.all([
        limiter.hit(addressKey(address), LOGIN_THROTTLE.perAddress, LOGIN_THROTTLE.windowMs),
        limiter.hit(accountKey(email), LOGIN_THROTTLE.perAccount, LOGIN_THROTTLE.windowMs),
      ]);
    },
    async succeeded() {
      await loginAttempts.delete(key);
    },
  };
}

function throttled(retryAt: number, clock: Clock): ApiError {
  return new ApiError('rate_limited', 'Too many failed sign-in attempts; try again later.', { 'Retry-After': String(secondsUntil(retryAt, clock.now())) });
}

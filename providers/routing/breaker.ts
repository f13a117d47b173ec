import { PROVIDER_ERROR_CODES } from '../adapter.ts';

/**
 * A passive circuit breaker of one provider deployment, as data and pure functions: no I/O, time passed in.
 * Jobs themselves are the evidence (no paid health probes). docs/routing.md tells the states and settings.
 *
 *   closed ──(failure ratio over the window, a Retry-After, an auth failure)──▶ open
 *   open ──(cool-down over: the first caller takes the one ticket)──▶ half_open
 *   half_open ──(the ticket's job succeeded)──▶ closed
 *   half_open ──(the ticket's job failed: cool-down doubled, capped)──▶ open
 *
 * The memory store applies these functions; the Redis store runs the same rules in Lua (redis-breaker-store.ts),
 * and one test suite holds both to the same behaviour.
 */

export type BreakerStatus = 'closed' | 'open' | 'half_open';

export interface BreakerSettings {
  /** The sliding window outcomes are counted over, milliseconds. */
  windowMs: number;
  /** Counted outcomes the window must hold before its failure ratio may open the breaker. */
  minCalls: number;
  /** Failures over counted outcomes at or above which the breaker opens (0 < ratio ≤ 1). */
  failureRatio: number;
  /** The first cool-down after an opening by failures, milliseconds. */
  cooldownMs: number;
  /** Each failed half-open job doubles the cool-down, up to this. */
  maxCooldownMs: number;
  /** A half-open ticket whose job has not reported in this long is given to the next caller (its node may have died). */
  probeTimeoutMs: number;
  /** The longest a `Retry-After` may keep the breaker open (a provider asking for a day gets this). */
  maxRetryAfterMs: number;
  /** `provider_auth_failed` opens at once (a wrong or revoked key fails every job), instead of counting in the ratio. */
  openOnAuthFailure: boolean;
}

export const DEFAULT_BREAKER_SETTINGS: Readonly<BreakerSettings> = Object.freeze({
  windowMs: 60_000,
  minCalls: 10,
  failureRatio: 0.5,
  cooldownMs: 30_000,
  maxCooldownMs: 10 * 60_000,
  probeTimeoutMs: 10 * 60_000,
  maxRetryAfterMs: 60 * 60_000,
  openOnAuthFailure: true,
});

/**
 * The codes that say something about the deployment's health. Every other code (the input refused, content
 * policy, our own validation, an output we could not fetch, a cancel) is neither a failure nor a success.
 */
export const COUNTED_FAILURES: ReadonlySet<string> = new Set([
  PROVIDER_ERROR_CODES.rateLimited,
  PROVIDER_ERROR_CODES.unavailable,
  PROVIDER_ERROR_CODES.timeout,
  PROVIDER_ERROR_CODES.error,
  PROVIDER_ERROR_CODES.badResponse,
  PROVIDER_ERROR_CODES.authFailed,
]);

/** A job's outcome as the router reports it. `retryAfterMs`: the `Retry-After` of a 429, when there was one. */
export type JobOutcome = { ok: true } | { ok: false; errorCode: string; retryAfterMs?: number };

/** What an outcome means to the breaker. */
export type Verdict = { kind: 'success' } | { kind: 'neutral' } | { kind: 'failure'; retryAfterMs: number | undefined; atOnce: boolean };

export function verdictOf(outcome: JobOutcome, settings: BreakerSettings): Verdict {
  if (outcome.ok) return { kind: 'success' };
  if (!COUNTED_FAILURES.has(outcome.errorCode)) return { kind: 'neutral' };
  const retryAfter =
    outcome.errorCode === PROVIDER_ERROR_CODES.rateLimited && outcome.retryAfterMs !== undefined && Number.isFinite(outcome.retryAfterMs)
      ? Math.min(Math.max(0, Math.round(outcome.retryAfterMs)), settings.maxRetryAfterMs)
      : undefined;
  return { kind: 'failure', retryAfterMs: retryAfter, atOnce: settings.openOnAuthFailure && outcome.errorCode === PROVIDER_ERROR_CODES.authFailed };
}

/**
 * The window is kept as WINDOW_BUCKETS buckets of counts (time-based sliding window as Resilience4j and Hystrix
 * keep theirs): recording costs the same whatever the rate, where a list of every outcome grew with it (30,000
 * entries a minute at 500 jobs/s, copied at each outcome). A bucket covers `bucketMsOf(settings)` from a multiple
 * of that length, and leaves the window whole once its start is `windowMs` old: an outcome counts for between
 * `windowMs - bucketMs` and `windowMs`.
 */
export const WINDOW_BUCKETS = 60;

/** The length of one bucket of the window: a sixtieth of it (1 s for the default minute), at least 1 ms. */
export function bucketMsOf(settings: Pick<BreakerSettings, 'windowMs'>): number {
  return Math.max(1, Math.ceil(settings.windowMs / WINDOW_BUCKETS));
}

/** The counted outcomes of one bucket of the window. */
export interface WindowBucket {
  /** Its start, epoch ms, a multiple of the bucket length. */
  start: number;
  calls: number;
  failures: number;
}

/** A deployment's breaker, as stored. A deployment never seen is `closedBreaker()`. */
export interface BreakerRecord {
  status: BreakerStatus;
  /** Closed: the counted outcomes of the window by bucket, oldest first (emptied when the breaker opens). */
  window: WindowBucket[];
  /** Open: until when no job goes (epoch ms). */
  openUntil: number | null;
  /** The cool-down of the last opening by failures; the next failed half-open job doubles it. 0 once closed. */
  cooldownMs: number;
  /** Half-open: the ticket of the one job let through, and when it was taken. */
  ticket: string | null;
  ticketAt: number | null;
  /** Open or half-open: what opened it last (its window is emptied then, so these say why). */
  opened?: Opening;
}

/** What opened a breaker: when, the window's counts at that moment, and the rule that did it. */
export interface Opening {
  at: number;
  calls: number;
  failures: number;
  /** `failures`: the window's ratio; `retry_after`: a 429's Retry-After; `at_once`: a failure that opens at once (a refused key); `probe_failed`: the half-open job failed. */
  reason: 'failures' | 'retry_after' | 'at_once' | 'probe_failed';
}

export function closedBreaker(): BreakerRecord {
  return { status: 'closed', window: [], openUntil: null, cooldownMs: 0, ticket: null, ticketAt: null };
}

export interface Transition {
  from: BreakerStatus;
  to: BreakerStatus;
}

export type Admission =
  | { allowed: true; ticket?: string }
  /** `retryAt`: when the cool-down ends (open), null while another caller's half-open job runs. */
  | { allowed: false; status: 'open' | 'half_open'; retryAt: number | null };

export interface Step<R = undefined> {
  record: BreakerRecord;
  transition?: Transition;
  result: R;
}

/**
 * Before a job goes to the deployment: closed lets it go; open refuses it until the cool-down ends; the first
 * caller after that gets `ticket` (half-open) and every other is refused until that job reports, or until
 * `probeTimeoutMs` passes without a report.
 */
export function admit(record: BreakerRecord, now: number, settings: BreakerSettings, ticket: string): Step<Admission> {
  switch (record.status) {
    case 'closed':
      return { record, result: { allowed: true } };
    case 'open':
      if (record.openUntil !== null && now < record.openUntil) return { record, result: { allowed: false, status: 'open', retryAt: record.openUntil } };
      return {
        record: { ...record, status: 'half_open', openUntil: null, ticket, ticketAt: now },
        transition: { from: 'open', to: 'half_open' },
        result: { allowed: true, ticket },
      };
    case 'half_open':
      if (record.ticket !== null && record.ticketAt !== null && now - record.ticketAt < settings.probeTimeoutMs) {
        return { record, result: { allowed: false, status: 'half_open', retryAt: null } };
      }
      return { record: { ...record, ticket, ticketAt: now }, result: { allowed: true, ticket } };
  }
}

/**
 * A job's outcome. `ticket`: the one its admission gave, if any; in half-open only the ticket's job decides.
 * A `Retry-After` is the provider's own word, so it opens (or keeps open) the breaker for exactly that long
 * whoever reports it, and never shortens an opening already longer.
 */
export function recordOutcome(record: BreakerRecord, verdict: Verdict, now: number, settings: BreakerSettings, ticket?: string): Step {
  const holdsTicket = ticket !== undefined && record.ticket !== null && record.ticket === ticket;
  switch (record.status) {
    case 'closed': {
      if (verdict.kind === 'neutral') return { record, result: undefined };
      const window = counted(pruned(record.window, now, settings), now, verdict.kind === 'failure', settings);
      if (verdict.kind === 'failure') {
        const { calls, failures } = totals(window);
        if (verdict.retryAfterMs !== undefined) {
          return opened(record, 'closed', now + verdict.retryAfterMs, record.cooldownMs, { at: now, calls, failures, reason: 'retry_after' });
        }
        if (verdict.atOnce) return opened(record, 'closed', now + settings.cooldownMs, settings.cooldownMs, { at: now, calls, failures, reason: 'at_once' });
        if (calls >= settings.minCalls && failures / calls >= settings.failureRatio) {
          return opened(record, 'closed', now + settings.cooldownMs, settings.cooldownMs, { at: now, calls, failures, reason: 'failures' });
        }
      }
      return { record: { ...record, window }, result: undefined };
    }
    case 'open':
      // Jobs sent before the opening end now; only a Retry-After moves the opening (later, never sooner).
      if (verdict.kind === 'failure' && verdict.retryAfterMs !== undefined && (record.openUntil === null || now + verdict.retryAfterMs > record.openUntil)) {
        return { record: { ...record, openUntil: now + verdict.retryAfterMs }, result: undefined };
      }
      return { record, result: undefined };
    case 'half_open':
      if (holdsTicket) {
        if (verdict.kind === 'success') return { record: closedBreaker(), transition: { from: 'half_open', to: 'closed' }, result: undefined };
        // Caused by its input: it says nothing of the deployment, so the next caller probes instead.
        if (verdict.kind === 'neutral') return { record: { ...record, ticket: null, ticketAt: null }, result: undefined };
        const cooldown = nextCooldown(record.cooldownMs, settings);
        return opened(record, 'half_open', now + (verdict.retryAfterMs ?? cooldown), cooldown, { at: now, calls: 1, failures: 1, reason: 'probe_failed' });
      }
      if (verdict.kind === 'failure' && verdict.retryAfterMs !== undefined) {
        return opened(record, 'half_open', now + verdict.retryAfterMs, record.cooldownMs, { at: now, calls: 1, failures: 1, reason: 'retry_after' });
      }
      return { record, result: undefined };
  }
}

/** What an operator reads of a breaker at `now`: an open breaker whose cool-down is over shows as half-open. */
export interface BreakerView {
  status: BreakerStatus;
  /** Counted outcomes in the window now (closed only; an open breaker starts a new window when it closes). */
  calls: number;
  failures: number;
  /** failures / calls, 0 when there are none. */
  failureRatio: number;
  openUntil: number | null;
  cooldownMs: number;
  /** Half-open: a job holds the ticket. */
  probing: boolean;
  /** Open or half-open: what opened it (absent while closed). */
  opened?: Opening;
}

export function viewOf(record: BreakerRecord, now: number, settings: BreakerSettings): BreakerView {
  const { calls, failures } = totals(record.status === 'closed' ? pruned(record.window, now, settings) : []);
  return viewFrom(record, calls, failures, now, settings);
}

/** The view from a stored state and its window's counts (the Redis store counts with its sorted sets). */
export function viewFrom(
  state: Pick<BreakerRecord, 'status' | 'openUntil' | 'cooldownMs' | 'ticketAt' | 'opened'>,
  calls: number,
  failures: number,
  now: number,
  settings: BreakerSettings,
): BreakerView {
  const cooledDown = state.status === 'open' && state.openUntil !== null && now >= state.openUntil;
  return {
    status: cooledDown ? 'half_open' : state.status,
    calls: state.status === 'closed' ? calls : 0,
    failures: state.status === 'closed' ? failures : 0,
    failureRatio: state.status === 'closed' && calls > 0 ? failures / calls : 0,
    openUntil: state.status === 'open' && !cooledDown ? state.openUntil : null,
    cooldownMs: state.cooldownMs,
    probing: state.status === 'half_open' && state.ticketAt !== null && now - state.ticketAt < settings.probeTimeoutMs,
    ...(state.status !== 'closed' && state.opened ? { opened: state.opened } : {}),
  };
}

export function nextCooldown(current: number, settings: BreakerSettings): number {
  return current <= 0 ? settings.cooldownMs : Math.min(current * 2, settings.maxCooldownMs);
}

function opened(record: BreakerRecord, from: BreakerStatus, until: number, cooldownMs: number, opening: Opening): Step {
  return {
    record: { ...record, status: 'open', window: [], openUntil: until, cooldownMs, ticket: null, ticketAt: null, opened: opening },
    transition: { from, to: 'open' },
    result: undefined,
  };
}

/** The buckets still in the window at `now`: those whose start is less than `windowMs` old. */
function pruned(window: WindowBucket[], now: number, settings: BreakerSettings): WindowBucket[] {
  const since = now - settings.windowMs;
  let first = 0;
  while (first < window.length && window[first]!.start <= since) first++;
  return first === 0 ? window : window.slice(first);
}

/** The window with one more outcome at `now`, in its bucket (a new one at the end if `now` starts one). */
function counted(window: WindowBucket[], now: number, failed: boolean, settings: BreakerSettings): WindowBucket[] {
  const size = bucketMsOf(settings);
  const start = now - (((now % size) + size) % size);
  const last = window[window.length - 1];
  if (last !== undefined && last.start === start) {
    return [...window.slice(0, -1), { start, calls: last.calls + 1, failures: last.failures + (failed ? 1 : 0) }];
  }
  return [...window, { start, calls: 1, failures: failed ? 1 : 0 }];
}

function totals(window: WindowBucket[]): { calls: number; failures: number } {
  let calls = 0;
  let failures = 0;
  for (const bucket of window) {
    calls += bucket.calls;
    failures += bucket.failures;
  }
  return { calls, failures };
}

/** Settings with every value checked; a wrong one is a programming or configuration error, said at once. */
export function breakerSettings(overrides: Partial<BreakerSettings> = {}, base: BreakerSettings = DEFAULT_BREAKER_SETTINGS): BreakerSettings {
  const settings = { ...base, ...stripUndefined(overrides) };
  const positive = (name: keyof BreakerSettings) => {
    const value = settings[name];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
      throw new RangeError(`breaker setting ${name}: a whole number of at least 1 expected, got ${String(value)}`);
  };
  for (const name of ['windowMs', 'minCalls', 'cooldownMs', 'maxCooldownMs', 'probeTimeoutMs', 'maxRetryAfterMs'] as const) positive(name);
  if (!(settings.failureRatio > 0 && settings.failureRatio <= 1))
    throw new RangeError(`breaker setting failureRatio: above 0 and at most 1 expected, got ${settings.failureRatio}`);
  if (settings.maxCooldownMs < settings.cooldownMs) throw new RangeError('breaker setting maxCooldownMs: must be at least cooldownMs');
  return settings;
}

function stripUndefined<T extends object>(value: Partial<T>): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

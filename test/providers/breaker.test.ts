import t from 'tap';
import {
  admit,
  breakerSettings,
  closedBreaker,
  nextCooldown,
  recordOutcome,
  verdictOf,
  viewOf,
  COUNTED_FAILURES,
  type BreakerRecord,
  type BreakerSettings,
  type JobOutcome,
  type Transition,
} from '../../providers/routing/breaker.ts';
import { PROVIDER_ERROR_CODES } from '../../providers/adapter.ts';

const settings = breakerSettings({ windowMs: 60_000, minCalls: 10, failureRatio: 0.5, cooldownMs: 1_000, maxCooldownMs: 5_000, probeTimeoutMs: 30_000 });
const START = Date.UTC(2026, 0, 1);
const ok: JobOutcome = { ok: true };
const down: JobOutcome = { ok: false, errorCode: 'provider_unavailable' };

/** Applies outcomes one after the other (each at `at`), returning the record and the transitions made. */
function feed(
  record: BreakerRecord,
  outcomes: JobOutcome[],
  at: number,
  s: BreakerSettings = settings,
  ticket?: string,
): { record: BreakerRecord; transitions: Transition[] } {
  const transitions: Transition[] = [];
  for (const outcome of outcomes) {
    const step = recordOutcome(record, verdictOf(outcome, s), at, s, ticket);
    record = step.record;
    if (step.transition) transitions.push(step.transition);
  }
  return { record, transitions };
}

const times = <T>(n: number, value: T): T[] => Array.from({ length: n }, () => value);

/** A breaker opened by failures at START (cool-down 1 s). */
/** What opened the breaker of openedAtStart: its window's ten failures. */
const OPENED_AT_START = { at: START, calls: 10, failures: 10, reason: 'failures' };

function openedAtStart(): BreakerRecord {
  const { record } = feed(closedBreaker(), times(10, down), START);
  return record;
}

t.test('closed: opens when the window holds at least minCalls and the failure ratio reaches the threshold', async (t) => {
  let { record, transitions } = feed(closedBreaker(), [...times(5, ok), ...times(4, down)], START);
  t.equal(record.status, 'closed', '4 of 9: below the minimum count and the ratio');
  t.same(transitions, []);
  ({ record, transitions } = feed(record, [down], START + 1));
  t.equal(record.status, 'open', '5 failures of 10 calls: 0.5 reaches the threshold');
  t.same(transitions, [{ from: 'closed', to: 'open' }]);
  t.equal(record.openUntil, START + 1 + 1_000, 'for the first cool-down');
  t.same(record.window, [], 'the window starts again after the opening');
});

t.test('closed: a high ratio below the minimum number of calls does not open', async (t) => {
  const { record } = feed(closedBreaker(), times(9, down), START);
  t.equal(record.status, 'closed', '9 failures of 9: still fewer than minCalls');
  t.same(viewOf(record, START, settings), { status: 'closed', calls: 9, failures: 9, failureRatio: 1, openUntil: null, cooldownMs: 0, probing: false });
  t.equal(feed(record, [ok], START).record.status, 'closed', 'a success never opens it, whatever the ratio');
  t.equal(feed(record, [down], START).record.status, 'open', 'the tenth failure opens it');
});

t.test('closed: a ratio just below the threshold stays closed; outcomes leave the window when it slides', async (t) => {
  let { record } = feed(closedBreaker(), [...times(6, ok), ...times(4, down)], START);
  t.equal(record.status, 'closed', '0.4 < 0.5');
  // The six successes were at START; a minute later they have left the window.
  ({ record } = feed(record, [down], START + 60_000));
  t.equal(record.status, 'closed', 'after the slide the window holds only this failure: below minCalls');
  t.equal(viewOf(record, START + 60_000, settings).calls, 1);
  ({ record } = feed(record, times(9, down), START + 60_001));
  t.equal(record.status, 'open');
});

t.test('closed: the window is kept in buckets, so its size stays the same at any rate', async (t) => {
  // 120,000 successes over two minutes (1,000 a second), then a few failures: the window holds the last
  // minute's counts in at most 60 buckets of a second, whatever the rate.
  let record = closedBreaker();
  for (let i = 0; i < 120_000; i++)
    record = recordOutcome(record, verdictOf(ok, settings), START + Math.floor(i / 1_000) * 1_000 + (i % 1_000), settings).record;
  const end = START + 120_000;
  t.ok(record.window.length <= 60, `${record.window.length} buckets`);
  t.equal(viewOf(record, end - 1, settings).calls, 60_000, 'the buckets whose start is less than a minute old: seconds 60 to 119');
  t.equal(viewOf(record, end - 1, settings).failures, 0);
  ({ record } = feed(record, times(3, down), end));
  const view = viewOf(record, end, settings);
  t.equal(view.calls, 59_003, 'second 60 left the window at 120 s, and the three failures came in');
  t.equal(view.failures, 3);
  t.equal(record.status, 'closed', '3 failures of 59,003: far below the ratio');
});

t.test('closed: an outcome counts until the start of its bucket is a window old (at most a bucket early)', async (t) => {
  const s = breakerSettings({ ...settings, windowMs: 6_000, minCalls: 1, failureRatio: 1 });
  // Buckets of 100 ms (a sixtieth of 6 s). A success at 50 ms into its bucket.
  let { record } = feed(closedBreaker(), [ok], START + 50, s);
  t.equal(viewOf(record, START + 5_999, s).calls, 1, 'in the window 5,949 ms later');
  t.equal(viewOf(record, START + 6_000, s).calls, 0, 'gone once its bucket started 6 s ago, 5,950 ms after it');
  ({ record } = feed(record, [down], START + 6_000, s));
  t.equal(record.status, 'open', 'the failure alone is the whole window');
});

t.test('input failures are neither failures nor successes', async (t) => {
  for (const code of [
    PROVIDER_ERROR_CODES.inputRejected,
    PROVIDER_ERROR_CODES.contentPolicy,
    'validation_error',
    PROVIDER_ERROR_CODES.outputFetch,
    PROVIDER_ERROR_CODES.cancelled,
  ]) {
    t.same(verdictOf({ ok: false, errorCode: code }, settings), { kind: 'neutral' }, `${code} is neutral`);
  }
  for (const code of ['provider_rate_limited', 'provider_unavailable', 'provider_timeout', 'provider_error', 'provider_bad_response', 'provider_auth_failed']) {
    t.ok(COUNTED_FAILURES.has(code), `${code} counts`);
  }
  // One tenant's refused prompts, however many, never open the deployment for everybody.
  let { record } = feed(closedBreaker(), times(50, { ok: false, errorCode: PROVIDER_ERROR_CODES.contentPolicy }), START);
  t.equal(record.status, 'closed');
  t.equal(viewOf(record, START, settings).calls, 0, 'not even counted as calls');
  ({ record } = feed(record, [...times(9, down), ...times(20, { ok: false, errorCode: PROVIDER_ERROR_CODES.inputRejected })], START));
  t.equal(record.status, 'closed', 'nor do they dilute or complete the real failures');
  t.equal(viewOf(record, START, settings).failureRatio, 1);
});

t.test('a 429 with Retry-After opens at once for exactly that long', async (t) => {
  const limited: JobOutcome = { ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited, retryAfterMs: 7_000 };
  const { record, transitions } = feed(closedBreaker(), [ok, ok, limited], START);
  t.same(transitions, [{ from: 'closed', to: 'open' }], 'one 429 among successes is enough');
  t.equal(record.openUntil, START + 7_000);
  t.same(admit(record, START + 6_999, settings, 'a').result, { allowed: false, status: 'open', retryAt: START + 7_000 }, 'refused a millisecond before');
  t.same(admit(record, START + 7_000, settings, 'a').result, { allowed: true, ticket: 'a' }, 'half-open exactly at its end');
  // Without a Retry-After a 429 is an ordinary failure of the ratio.
  t.equal(feed(closedBreaker(), [{ ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited }], START).record.status, 'closed');
  // The Retry-After of another code (a 503's) is not the rate limit's word.
  t.equal(feed(closedBreaker(), [{ ok: false, errorCode: 'provider_unavailable', retryAfterMs: 5_000 }], START).record.status, 'closed');
  // A provider asking for a day gets maxRetryAfterMs.
  const capped = feed(closedBreaker(), [{ ...limited, retryAfterMs: 86_400_000 }], START).record;
  t.equal(capped.openUntil, START + settings.maxRetryAfterMs);
});

t.test('open: a later Retry-After extends the opening, a shorter one never shortens it; other outcomes change nothing', async (t) => {
  let record = openedAtStart();
  t.equal(record.openUntil, START + 1_000);
  ({ record } = feed(record, [ok, down, { ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited, retryAfterMs: 500 }], START + 10));
  t.equal(record.status, 'open');
  t.equal(record.openUntil, START + 1_000, 'jobs sent before the opening end without effect; a shorter Retry-After is ignored');
  ({ record } = feed(record, [{ ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited, retryAfterMs: 4_000 }], START + 20));
  t.equal(record.openUntil, START + 4_020, 'a longer one moves the end');
});

t.test('an auth failure opens at once (unless configured not to)', async (t) => {
  const auth: JobOutcome = { ok: false, errorCode: PROVIDER_ERROR_CODES.authFailed };
  const { record, transitions } = feed(closedBreaker(), [ok, auth], START);
  t.same(transitions, [{ from: 'closed', to: 'open' }]);
  t.equal(record.openUntil, START + 1_000);
  const patient = breakerSettings({ openOnAuthFailure: false }, settings);
  t.equal(feed(closedBreaker(), [auth], START, patient).record.status, 'closed', 'then it counts in the ratio like any failure');
});

t.test('half-open: the first caller after the cool-down gets the one ticket, every other is refused until it reports', async (t) => {
  const record = openedAtStart();
  t.same(admit(record, START + 999, settings, 'x').result, { allowed: false, status: 'open', retryAt: START + 1_000 });
  const first = admit(record, START + 1_000, settings, 'ticket-1');
  t.same(first.result, { allowed: true, ticket: 'ticket-1' });
  t.same(first.transition, { from: 'open', to: 'half_open' });
  let current = first.record;
  for (let i = 0; i < 5; i++) {
    const other = admit(current, START + 1_001 + i, settings, `other-${i}`);
    t.same(other.result, { allowed: false, status: 'half_open', retryAt: null }, `caller ${i + 2} refused`);
    t.equal(other.transition, undefined);
    current = other.record;
  }
  t.equal(current.ticket, 'ticket-1', 'the ticket stays with its holder');
  t.same(viewOf(current, START + 1_002, settings), {
    status: 'half_open',
    calls: 0,
    failures: 0,
    failureRatio: 0,
    openUntil: null,
    cooldownMs: 1_000,
    probing: true,
    opened: OPENED_AT_START,
  });
  // Outcomes without the ticket (jobs from before the opening) decide nothing.
  t.equal(feed(current, [ok, down], START + 1_003).record.status, 'half_open');
  t.equal(feed(current, [ok], START + 1_003, settings, 'other-0').record.status, 'half_open', "a refused caller's ticket is no ticket");
});

t.test("half-open: the ticket's success closes the breaker and forgets the cool-down", async (t) => {
  const { record: half } = admit(openedAtStart(), START + 1_000, settings, 'p');
  const step = recordOutcome(half, verdictOf(ok, settings), START + 1_500, settings, 'p');
  t.same(step.transition, { from: 'half_open', to: 'closed' });
  t.same(step.record, closedBreaker());
  t.same(admit(step.record, START + 1_501, settings, 'q').result, { allowed: true }, 'closed: no ticket needed');
});

t.test("half-open: the ticket's failure opens again with the cool-down doubled, capped", async (t) => {
  let record = openedAtStart();
  let now = START;
  const seen: number[] = [];
  for (let round = 0; round < 5; round++) {
    now = record.openUntil!;
    const granted = admit(record, now, settings, `p${round}`);
    t.ok(granted.result.allowed);
    const failed = recordOutcome(granted.record, verdictOf(down, settings), now + 10, settings, `p${round}`);
    t.same(failed.transition, { from: 'half_open', to: 'open' });
    record = failed.record;
    seen.push(record.openUntil! - (now + 10));
  }
  t.same(seen, [2_000, 4_000, 5_000, 5_000, 5_000], 'doubling from the first cool-down (1 s), capped at 5 s');
  // Once closed, the next opening starts from the first cool-down again.
  const granted = admit(record, record.openUntil!, settings, 'last');
  const closed = recordOutcome(granted.record, verdictOf(ok, settings), record.openUntil! + 1, settings, 'last').record;
  const reopened = feed(closed, times(10, down), record.openUntil! + 2).record;
  t.equal(reopened.openUntil! - (record.openUntil! + 2), 1_000);
  t.equal(nextCooldown(0, settings), 1_000);
});

t.test("half-open: a ticket holder's 429 opens for its Retry-After; anyone's 429 with Retry-After reopens", async (t) => {
  const { record: half } = admit(openedAtStart(), START + 1_000, settings, 'p');
  const limited: JobOutcome = { ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited, retryAfterMs: 9_000 };
  const own = recordOutcome(half, verdictOf(limited, settings), START + 1_100, settings, 'p').record;
  t.equal(own.openUntil, START + 10_100, 'exactly the Retry-After');
  t.equal(own.cooldownMs, 2_000, 'the failed probe still doubles the level for the next opening by failures');
  const stranger = recordOutcome(half, verdictOf(limited, settings), START + 1_100, settings).record;
  t.equal(stranger.status, 'open');
  t.equal(stranger.openUntil, START + 10_100);
  t.equal(stranger.ticket, null, "the probe's ticket is void");
  t.equal(stranger.cooldownMs, 1_000, 'the level unchanged');
});

t.test("half-open: an input failure of the ticket's job gives the ticket back, so the next caller probes", async (t) => {
  const { record: half } = admit(openedAtStart(), START + 1_000, settings, 'p');
  const step = recordOutcome(half, verdictOf({ ok: false, errorCode: PROVIDER_ERROR_CODES.contentPolicy }, settings), START + 1_200, settings, 'p');
  t.equal(step.transition, undefined);
  t.equal(step.record.status, 'half_open');
  t.same(admit(step.record, START + 1_201, settings, 'q').result, { allowed: true, ticket: 'q' });
});

t.test('half-open: a ticket never reported is given to the next caller after probeTimeoutMs', async (t) => {
  const { record: half } = admit(openedAtStart(), START + 1_000, settings, 'lost');
  t.same(admit(half, START + 1_000 + 29_999, settings, 'b').result, { allowed: false, status: 'half_open', retryAt: null });
  const retaken = admit(half, START + 1_000 + 30_000, settings, 'b');
  t.same(retaken.result, { allowed: true, ticket: 'b' });
  t.equal(viewOf(half, START + 31_000, settings).probing, false, 'read as not probing once the ticket has lapsed');
  t.equal(
    recordOutcome(retaken.record, verdictOf(ok, settings), START + 31_001, settings, 'lost').record.status,
    'half_open',
    'the lapsed ticket decides nothing',
  );
  t.equal(recordOutcome(retaken.record, verdictOf(ok, settings), START + 31_001, settings, 'b').record.status, 'closed');
});

t.test('view: an open breaker past its cool-down reads half-open, waiting for a job', async (t) => {
  const record = openedAtStart();
  t.same(viewOf(record, START + 500, settings), {
    status: 'open',
    calls: 0,
    failures: 0,
    failureRatio: 0,
    openUntil: START + 1_000,
    cooldownMs: 1_000,
    probing: false,
    opened: OPENED_AT_START,
  });
  t.same(viewOf(record, START + 1_000, settings), {
    status: 'half_open',
    calls: 0,
    failures: 0,
    failureRatio: 0,
    openUntil: null,
    cooldownMs: 1_000,
    probing: false,
    opened: OPENED_AT_START,
  });
  const closed = recordOutcome(admit(record, START + 1_000, settings, 't').record, verdictOf(ok, settings), START + 1_001, settings, 't').record;
  t.equal(viewOf(closed, START + 1_001, settings).opened, undefined, 'closed again: nothing said of the opening');
});

t.test('settings: defaults, overrides and refused values', async (t) => {
  const defaults = breakerSettings();
  t.same(defaults, {
    windowMs: 60_000,
    minCalls: 10,
    failureRatio: 0.5,
    cooldownMs: 30_000,
    maxCooldownMs: 600_000,
    probeTimeoutMs: 600_000,
    maxRetryAfterMs: 3_600_000,
    openOnAuthFailure: true,
  });
  t.equal(breakerSettings({ minCalls: 3, windowMs: undefined }).minCalls, 3, 'an undefined override keeps the default');
  t.throws(() => breakerSettings({ minCalls: 0 }), /minCalls/);
  t.throws(() => breakerSettings({ failureRatio: 0 }), /failureRatio/);
  t.throws(() => breakerSettings({ failureRatio: 1.5 }), /failureRatio/);
  t.throws(() => breakerSettings({ windowMs: 1.5 }), /windowMs/);
  t.throws(() => breakerSettings({ cooldownMs: 10_000, maxCooldownMs: 5_000 }), /maxCooldownMs/);
});

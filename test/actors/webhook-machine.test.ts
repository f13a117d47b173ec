import t from 'tap';
import { decide, deliveryBackoff, MAX_ATTEMPTS, pendingDelivery, type AttemptOutcome, type DeliveryState } from '../../actors/webhook/machine.ts';

const T0 = Date.UTC(2026, 0, 1);
const answered = (status: number): AttemptOutcome => ({ type: 'answered', status, durationMs: 12.4 });

function attempt(state: DeliveryState, outcome: AttemptOutcome, at: number, jitter = 0): DeliveryState {
  const decision = decide(state, { type: 'attempted', at, outcome, jitter });
  if (!decision.ok) throw new Error(decision.reason);
  return decision.state;
}

t.test('backoff: min(30 s × 2^(n-1), 1 h), plus up to 10% jitter', async (t) => {
  t.same(
    [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => deliveryBackoff(n, 0)),
    [30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000],
  );
  t.equal(deliveryBackoff(1, 1), 33_000, 'full jitter is +10%');
  t.equal(deliveryBackoff(8, 0.5), 3_780_000);
  t.equal(deliveryBackoff(1, 7), 33_000, 'jitter is clamped to 0..1');
  t.equal(deliveryBackoff(1, -1), 30_000);
});

t.test('any 2xx delivers; the attempt is recorded', async (t) => {
  for (const status of [200, 201, 204, 299]) {
    const next = attempt(pendingDelivery(T0), answered(status), T0);
    t.equal(next.status, 'delivered');
    t.equal(next.nextAttemptAt, undefined);
    t.same(next.attempts, [{ attemptNumber: 1, at: new Date(T0).toISOString(), responseStatus: status, error: null, durationMs: 12 }]);
  }
});

t.test('non-2xx, time-out and connection errors schedule the next attempt; the fifth failure expires', async (t) => {
  const failures: AttemptOutcome[] = [
    answered(500),
    answered(302),
    { type: 'error', error: 'timeout: no answer', durationMs: 10_000 },
    answered(404),
    { type: 'error', error: 'network_error: ECONNREFUSED', durationMs: 1 },
  ];
  let state = pendingDelivery(T0);
  let at = T0;
  for (let n = 1; n <= MAX_ATTEMPTS; n++) {
    state = attempt(state, failures[n - 1]!, at, 0.5);
    t.equal(state.attempts.length, n);
    t.equal(state.attempts[n - 1]!.attemptNumber, n);
    if (n < MAX_ATTEMPTS) {
      t.equal(state.status, 'pending', `still pending after attempt ${n}`);
      t.equal(state.nextAttemptAt, at + deliveryBackoff(n, 0.5));
      at = state.nextAttemptAt!;
    }
  }
  t.equal(state.status, 'expired');
  t.equal(state.nextAttemptAt, undefined);
  t.match(
    state.attempts.map((a) => [a.responseStatus, a.error]),
    [
      [500, 'the endpoint answered 500'],
      [302, 'the endpoint answered 302'],
      [null, /^timeout/],
      [404, 'the endpoint answered 404'],
      [null, /^network_error/],
    ],
  );
});

t.test('an egress refusal fails at once; disabling or deleting the endpoint fails a pending delivery', async (t) => {
  const refused = attempt(pendingDelivery(T0), { type: 'refused', error: 'blocked_address: 10.0.0.1', durationMs: 0 }, T0);
  t.match(refused, { status: 'failed', failureReason: 'egress_refused', nextAttemptAt: undefined });
  t.equal(refused.attempts.length, 1);
  const retrying = attempt(pendingDelivery(T0), answered(500), T0);
  for (const type of ['endpoint_disabled', 'endpoint_deleted'] as const) {
    const decision = decide(retrying, { type });
    t.ok(decision.ok);
    if (decision.ok) t.match(decision.state, { status: 'failed', failureReason: type, nextAttemptAt: undefined, attempts: retrying.attempts });
  }
});

t.test('refused: nothing changes a delivery once it is delivered, failed or expired', async (t) => {
  const delivered = attempt(pendingDelivery(T0), answered(200), T0);
  const failed = attempt(pendingDelivery(T0), { type: 'refused', error: 'x', durationMs: 0 }, T0);
  let expired = pendingDelivery(T0);
  for (let n = 0; n < MAX_ATTEMPTS; n++) expired = attempt(expired, answered(500), T0);
  for (const state of [delivered, failed, expired]) {
    t.notOk(decide(state, { type: 'attempted', at: T0, outcome: answered(200), jitter: 0 }).ok, `${state.status}: no more attempts`);
    t.notOk(decide(state, { type: 'endpoint_disabled' }).ok, `${state.status}: not failed afterwards`);
    t.notOk(decide(state, { type: 'endpoint_deleted' }).ok);
  }
});

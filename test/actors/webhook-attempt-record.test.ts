import t from 'tap';
import { decide, pendingDelivery, type AttemptOutcome } from '../../actors/webhook/machine.ts';

const T0 = Date.UTC(2026, 0, 1);

/** The record one attempt leaves, and the delivery's status after it. */
function after(outcome: AttemptOutcome) {
  const decision = decide(pendingDelivery(T0), { type: 'attempted', at: T0, outcome, jitter: 0 });
  if (!decision.ok) throw new Error(decision.reason);
  return { status: decision.state.status, record: decision.state.attempts[0]! };
}

t.test('an attempt without an answer records no response status (null, not a missing value)', async (t) => {
  t.equal(after({ type: 'error', error: 'timeout: no answer', durationMs: 10_000 }).record.responseStatus, null);
  t.equal(after({ type: 'refused', error: 'blocked_address: 10.0.0.1', durationMs: 0 }).record.responseStatus, null);
  t.equal(after({ type: 'answered', status: 204, durationMs: 3 }).record.responseStatus, 204);
});

t.test('the duration is recorded in whole milliseconds, never below zero', async (t) => {
  t.equal(after({ type: 'refused', error: 'x', durationMs: 0 }).record.durationMs, 0);
  t.equal(after({ type: 'error', error: 'x', durationMs: -3 }).record.durationMs, 0, 'a clock step backwards reads as 0');
  t.equal(after({ type: 'error', error: 'x', durationMs: 0.4 }).record.durationMs, 0);
  t.equal(after({ type: 'error', error: 'x', durationMs: 0.5 }).record.durationMs, 1);
});

t.test('2xx is exactly 200 to 299', async (t) => {
  for (const [status, outcome] of [
    [199, 'pending'],
    [200, 'delivered'],
    [299, 'delivered'],
    [300, 'pending'],
  ] as const) {
    const { status: got, record } = after({ type: 'answered', status, durationMs: 1 });
    t.equal(got, outcome, `${status}: ${outcome}`);
    t.equal(record.error, outcome === 'delivered' ? null : `the endpoint answered ${status}`);
  }
});

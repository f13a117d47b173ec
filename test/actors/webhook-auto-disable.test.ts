import t from 'tap';
import { judgeAttempt, type DisablePolicy } from '../../actors/webhook/auto-disable.ts';

const DAY = 86_400_000;
const policy: DisablePolicy = { afterMs: 5 * DAY, afterExpired: 0 };
const healthy = { failingSince: undefined, consecutiveExpired: 0 };

t.test('successes on a healthy endpoint change nothing (nothing is written)', async (t) => {
  t.same(judgeAttempt(healthy, { ok: true, at: 1000, status: 'delivered' }, policy), { health: healthy, changed: false, disable: undefined });
});

t.test('the first failure starts the run; later failures within the time keep it; a success ends it', async (t) => {
  const first = judgeAttempt(healthy, { ok: false, at: 1000, status: 'pending' }, policy);
  t.same(first, { health: { failingSince: 1000, consecutiveExpired: 0 }, changed: true, disable: undefined });
  const later = judgeAttempt(first.health, { ok: false, at: 1000 + 5 * DAY - 1, status: 'pending' }, policy);
  t.same(later, { health: first.health, changed: false, disable: undefined });
  const recovered = judgeAttempt(later.health, { ok: true, at: 2000 + 5 * DAY, status: 'delivered' }, policy);
  t.same(recovered, { health: healthy, changed: true, disable: undefined });
});

t.test('failing for the whole time disables, with the reason', async (t) => {
  const verdict = judgeAttempt({ failingSince: 1000, consecutiveExpired: 0 }, { ok: false, at: 1000 + 5 * DAY, status: 'pending' }, policy);
  t.match(verdict.disable, /^every attempt failed for 5 days, since 1970-01-01T00:00:01.000Z$/);
});

t.test('expiries in a row count, and disable at the configured number; 0 means never', async (t) => {
  const counting = { afterMs: 0, afterExpired: 2 };
  const one = judgeAttempt(healthy, { ok: false, at: 1000, status: 'expired' }, counting);
  t.same(one, { health: { failingSince: 1000, consecutiveExpired: 1 }, changed: true, disable: undefined });
  const retry = judgeAttempt(one.health, { ok: false, at: 2000, status: 'pending' }, counting);
  t.equal(retry.health.consecutiveExpired, 1, 'a failed retry is not an expiry');
  const two = judgeAttempt(retry.health, { ok: false, at: 3000 + 365 * DAY, status: 'expired' }, counting);
  t.equal(two.disable, '2 deliveries in a row expired', 'afterMs 0: time alone never disables');
  t.equal(judgeAttempt(two.health, { ok: false, at: 4000, status: 'expired' }, { afterMs: 0, afterExpired: 0 }).disable, undefined, 'both rules off');
});

t.test('an egress refusal (failed) counts as a failure, not an expiry', async (t) => {
  const verdict = judgeAttempt(healthy, { ok: false, at: 1000, status: 'failed' }, policy);
  t.same(verdict.health, { failingSince: 1000, consecutiveExpired: 0 });
});

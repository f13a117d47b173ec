import t from 'tap';
import { deposit, emptyAccount, reserveWithinCap } from '../../domain/account.ts';
import {
  chargeKey,
  keyLimitsUsage,
  noKeyLimits,
  patchKeyLimits,
  periodEnd,
  refuseByKey,
  settleKey,
  spentIn,
  walletCapOf,
  type KeySpend,
} from '../../domain/key-limits.ts';
import { keySpendWrite } from '../../persistence/stores/workspace/keys.ts';

const JUNE_10 = Date.UTC(2026, 5, 10, 22, 0, 0);

function key(limits: Partial<KeySpend['limits']> = {}): KeySpend {
  return {
    limits: { ...noKeyLimits(), ...limits },
    day: { start: '2026-06-10', credits: 0, walletCents: 0 },
    month: { start: '2026-06-01', credits: 0, walletCents: 0 },
    unfinished: 0,
  };
}

t.test('periods: a day ends at the next UTC midnight, a month at the first of the next; a new period starts from zero', async (t) => {
  t.equal(new Date(periodEnd('day', JUNE_10)).toISOString(), '2026-06-11T00:00:00.000Z');
  t.equal(new Date(periodEnd('month', JUNE_10)).toISOString(), '2026-07-01T00:00:00.000Z');
  t.equal(new Date(periodEnd('month', Date.UTC(2026, 11, 31, 23, 59))).toISOString(), '2027-01-01T00:00:00.000Z');
  const k = key();
  chargeKey(k, 'key_1', 'ws_1', 3, 0, JUNE_10);
  t.same(spentIn(k, 'day', JUNE_10), { start: '2026-06-10', credits: 3, walletCents: 0 });
  t.same(spentIn(k, 'day', JUNE_10 + 2 * 3_600_000), { start: '2026-06-11', credits: 0, walletCents: 0 }, 'next day');
  t.equal(spentIn(k, 'month', JUNE_10 + 2 * 3_600_000).credits, 3, 'same month');
});

t.test('refusals in order: model, then concurrency, then budget; an exact fit is allowed', async (t) => {
  const k = key({ allowedModels: ['m/a'], maxConcurrentGenerations: 1, creditBudget: 2, period: 'day' });
  t.equal(refuseByKey(k, 'm/b', 1, JUNE_10)?.code, 'plan_limit_reached');
  t.equal(refuseByKey(k, 'm/a', 2, JUNE_10), undefined, 'the whole budget at once');
  t.match(refuseByKey(k, 'm/a', 3, JUNE_10), { code: 'insufficient_credits', message: /costs 3 credits; this API key's daily credit budget of 2 has 2 left/ });
  chargeKey(k, 'key_1', 'ws_1', 2, 0, JUNE_10);
  t.match(refuseByKey(k, 'm/a', 1, JUNE_10), { code: 'plan_limit_reached', message: /allows 1 unfinished/ });
  k.unfinished = 0;
  t.match(refuseByKey(k, 'm/a', 1, JUNE_10), {
    code: 'insufficient_credits',
    message: "This API key's daily credit budget of 2 is spent; it resets at 2026-06-11T00:00:00.000Z.",
  });
  t.equal(refuseByKey(k, 'm/a', 1, JUNE_10 + 2 * 3_600_000), undefined, 'the next day');
});

t.test('release gives back to the periods the job was counted in, and only while they are current', async (t) => {
  const k = key();
  const { job, deltas } = chargeKey(k, 'key_1', 'ws_1', 4, 20, JUNE_10);
  t.same(
    deltas.map((d) => [d.period, d.start, d.credits, d.walletCents]),
    [
      ['day', '2026-06-10', 4, 20],
      ['month', '2026-06-01', 4, 20],
    ],
  );
  const captured = settleKey(k, job, 'ws_1', undefined);
  t.same(captured, [], 'a capture changes no spend');
  t.equal(k.unfinished, 0);
  const again = chargeKey(k, 'key_1', 'ws_1', 1, 0, JUNE_10);
  chargeKey(k, 'key_1', 'ws_1', 1, 0, JUNE_10 + 2 * 3_600_000);
  t.same(
    settleKey(k, again.job, 'ws_1', { credits: again.job.credits, walletCents: again.job.walletCents }).map((d) => [d.period, d.start, d.credits]),
    [
      ['day', '2026-06-10', -1],
      ['month', '2026-06-01', -1],
    ],
    'rows of its own periods',
  );
  t.same(k.day, { start: '2026-06-11', credits: 1, walletCents: 0 }, 'today untouched by a job of yesterday');
  t.equal(k.month.credits, 5, 'the month gets it back');
});

t.test("the key's wallet cap refuses a wallet part past it, before the workspace's cap", async (t) => {
  const funded = deposit(emptyAccount(), 10_000, 'dep:1');
  if (!funded.ok) throw new Error('deposit refused');
  const k = key({ walletSpendCapCents: 100 });
  k.month.walletCents = 90;
  const refused = reserveWithinCap(funded.account, 'gen_1', 3, 'wallet', 5, null, { month: '2026-06', spentCents: 0 }, walletCapOf(k, JUNE_10));
  t.match(refused, {
    ok: false,
    code: 'wallet_insufficient_balance',
    message: /needs 15 cents from the wallet; this API key's monthly wallet spend cap of 100 cents leaves 10/,
  });
  t.same(funded.account.reservations, {}, 'a refusal reserves nothing');
  const fits = reserveWithinCap(funded.account, 'gen_2', 2, 'wallet', 5, null, { month: '2026-06', spentCents: 0 }, walletCapOf(k, JUNE_10));
  t.ok(fits.ok, '90 + 10 reaches the cap exactly');
  const credits = reserveWithinCap(
    { ...funded.account, availableCredits: 10 },
    'gen_3',
    3,
    'credits',
    5,
    null,
    { month: '2026-06', spentCents: 0 },
    walletCapOf(k, JUNE_10),
  );
  t.ok(credits.ok, 'credits are not held by the wallet cap');
});

t.test('usage figures, patches, and one summed write per row', async (t) => {
  const k = key({ creditBudget: 10, period: 'day' });
  chargeKey(k, 'key_1', 'ws_1', 4, 0, JUNE_10);
  t.same(keyLimitsUsage(k, JUNE_10), {
    period: 'day',
    creditBudget: { limit: 10, spent: 4, remaining: 6, resetsAt: '2026-06-11T00:00:00.000Z' },
    walletSpendCapCents: { limit: null, spent: 0, remaining: null, resetsAt: '2026-06-11T00:00:00.000Z' },
    concurrentGenerations: { limit: null, spent: 1, remaining: null, resetsAt: null },
    allowedModels: null,
  });
  t.same(patchKeyLimits(k.limits, { creditBudget: null, period: 'month' }), { ...noKeyLimits(), creditBudget: null, period: 'month' });
  t.same(patchKeyLimits(k.limits, {}), k.limits);
  const write = keySpendWrite([
    { keyId: 'key_1', workspaceId: 'ws_1', period: 'day', start: '2026-06-10', credits: 2, walletCents: 0 },
    { keyId: 'key_1', workspaceId: 'ws_1', period: 'day', start: '2026-06-10', credits: 3, walletCents: 5 },
    { keyId: 'key_2', workspaceId: 'ws_1', period: 'day', start: '2026-06-10', credits: 1, walletCents: 0 },
    { keyId: 'key_2', workspaceId: 'ws_1', period: 'day', start: '2026-06-10', credits: -1, walletCents: 0 },
  ]);
  t.same(
    JSON.parse(write!.params[0] as string),
    [{ key_id: 'key_1', workspace_id: 'ws_1', period: 'day', period_start: '2026-06-10', credits: 5, wallet_cents: 5 }],
    'summed per row; a row that nets to zero is not written',
  );
  t.equal(keySpendWrite([]), undefined);
});

import t from 'tap';
import { crossedThresholds, currentPeriods, hasThresholds, noBudgetSettings, type BudgetFigures, type KeyFigures } from '../../domain/budgets.ts';

/**
 * The budget rules of docs/money.md (Budget alerts) as pure functions: which thresholds a workspace's figures
 * are past, each named by its kind, subject, threshold and period. The events and the banner built on them are
 * in test/money/budget-alerts.test.ts.
 */

const key = (over: Partial<KeyFigures> = {}): KeyFigures => ({
  keyId: 'key_1',
  name: 'ci',
  period: 'day:2026-06-30',
  creditBudget: null,
  walletSpendCapCents: null,
  credits: 0,
  walletCents: 0,
  ...over,
});

const figures = (over: Partial<BudgetFigures> = {}): BudgetFigures => ({
  grantCredits: 100,
  availableCredits: 100,
  creditPeriod: 'month:2026-06',
  wallet: { activated: true, balanceCents: 10_000, period: 'deposit:dep_1' },
  keys: [],
  ...over,
});

const named = (settings: Parameters<typeof crossedThresholds>[0], f: BudgetFigures) =>
  crossedThresholds(settings, f).map((c) => `${c.kind}/${c.subject}/${c.threshold}/${c.period}`);

t.test('hasThresholds: any one list of thresholds is enough', async (t) => {
  t.equal(hasThresholds(noBudgetSettings()), false);
  t.equal(hasThresholds({ ...noBudgetSettings(), creditsUsedPercents: [80] }), true);
  t.equal(hasThresholds({ ...noBudgetSettings(), walletBelowCents: [500] }), true);
  t.equal(hasThresholds({ ...noBudgetSettings(), keySpendPercents: [90] }), true);
});

t.test('credits used: crossed at its exact share of the grant, with what was seen', async (t) => {
  const settings = { ...noBudgetSettings(), creditsUsedPercents: [79, 80, 81] };
  const crossed = crossedThresholds(settings, figures({ availableCredits: 20 }));
  t.same(
    crossed.map((c) => c.threshold),
    [79, 80],
    '80 of 100 used is 80 %, not 81 %',
  );
  t.same(crossed[1], {
    kind: 'credits_used',
    subject: '',
    threshold: 80,
    period: 'month:2026-06',
    details: { grantCredits: 100, availableCredits: 20, usedCredits: 80 },
  });
  t.same(named(settings, figures({ availableCredits: 21 })), ['credits_used//79/month:2026-06'], '79 used is below 80 %');
  t.same(named(settings, figures({ grantCredits: 0, availableCredits: 0 })), [], 'no grant: nothing to use up');
});

t.test('wallet balance: crossed strictly below the amount, and only once the wallet was funded', async (t) => {
  const settings = { ...noBudgetSettings(), walletBelowCents: [500, 499] };
  const wallet = (balanceCents: number, activated = true) => figures({ wallet: { activated, balanceCents, period: 'deposit:dep_2' } });
  t.same(named(settings, wallet(499)), ['wallet_balance//500/deposit:dep_2'], '499 cents is below 500, not below 499');
  t.same(named(settings, wallet(500)), [], 'exactly 500 cents is not below 500');
  t.same(named(settings, wallet(0, false)), [], 'a wallet never funded does not warn');
  t.same(crossedThresholds(settings, wallet(10))[0]?.details, { balanceCents: 10 });
});

t.test("a key's credit budget and wallet cap, each in the key's own period", async (t) => {
  const settings = { ...noBudgetSettings(), keySpendPercents: [50] };
  const capped = key({ creditBudget: 10, credits: 5, walletSpendCapCents: 1_000, walletCents: 500 });
  const crossed = crossedThresholds(settings, figures({ keys: [capped] }));
  t.same(crossed, [
    {
      kind: 'key_credit_budget',
      subject: 'key_1',
      threshold: 50,
      period: 'day:2026-06-30',
      details: { apiKeyName: 'ci', creditBudget: 10, spentCredits: 5 },
    },
    {
      kind: 'key_wallet_cap',
      subject: 'key_1',
      threshold: 50,
      period: 'day:2026-06-30',
      details: { apiKeyName: 'ci', walletSpendCapCents: 1_000, spentWalletCents: 500 },
    },
  ]);
  t.same(
    named(settings, figures({ keys: [key({ creditBudget: 10, credits: 4, walletSpendCapCents: 1_000, walletCents: 499 })] })),
    [],
    'just under half of each',
  );
  t.same(named(settings, figures({ keys: [key({ credits: 1_000, walletCents: 1_000 })] })), [], 'a key without caps never crosses');
  t.same(
    named(settings, figures({ keys: [key({ walletSpendCapCents: 100, walletCents: 60 })] })),
    ['key_wallet_cap/key_1/50/day:2026-06-30'],
    'a wallet cap alone',
  );
  t.same(named(settings, figures({ keys: [key({ creditBudget: 0, credits: 0 })] })), [], 'a budget of zero has no share to reach');
});

t.test('every kind at once comes in a stable order: credits, wallet, then each key in turn', async (t) => {
  const settings = { creditsUsedPercents: [50], walletBelowCents: [500], keySpendPercents: [50, 100] };
  const f = figures({
    availableCredits: 50,
    wallet: { activated: true, balanceCents: 100, period: 'deposit:dep_1' },
    keys: [key({ keyId: 'key_a', creditBudget: 2, credits: 2 }), key({ keyId: 'key_b', period: 'month:2026-06-01', walletSpendCapCents: 10, walletCents: 5 })],
  });
  t.same(named(settings, f), [
    'credits_used//50/month:2026-06',
    'wallet_balance//500/deposit:dep_1',
    'key_credit_budget/key_a/50/day:2026-06-30',
    'key_credit_budget/key_a/100/day:2026-06-30',
    'key_wallet_cap/key_b/50/month:2026-06-01',
  ]);
});

t.test('currentPeriods: the period of each kind and subject now', async (t) => {
  const f = figures({ keys: [key({ keyId: 'key_a' }), key({ keyId: 'key_b', period: 'month:2026-06-01' })] });
  t.same(
    [...currentPeriods(f)],
    [
      ['credits_used:', 'month:2026-06'],
      ['wallet_balance:', 'deposit:dep_1'],
      ['key_credit_budget:key_a', 'day:2026-06-30'],
      ['key_wallet_cap:key_a', 'day:2026-06-30'],
      ['key_credit_budget:key_b', 'month:2026-06-01'],
      ['key_wallet_cap:key_b', 'month:2026-06-01'],
    ],
  );
});

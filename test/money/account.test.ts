import t, { type Test } from 'tap';
import {
  capture,
  checkWalletSettings,
  defaultWalletSettings,
  deposit,
  emptyAccount,
  grant,
  needsAutoRecharge,
  release,
  reserve,
  reserveWithinCap,
  spendChange,
  sumLedger,
  WALLET_MINIMUM_DEPOSIT_CENTS,
  type Account,
  type LedgerEntry,
  type MoneyDecision,
} from '../../domain/account.ts';

/** The balances of an account, without its reservations. */
const balances = (a: Account) => ({
  availableCredits: a.availableCredits,
  reservedCredits: a.reservedCredits,
  walletCents: a.walletCents,
  reservedWalletCents: a.reservedWalletCents,
});

/** Applies decisions one after another, keeping the ledger; a refusal fails the test. */
function book(t: Test, start = emptyAccount()) {
  let account = start;
  const ledger: LedgerEntry[] = [];
  return {
    get account() {
      return account;
    },
    ledger,
    apply(decision: MoneyDecision, what: string): LedgerEntry[] {
      if (!decision.ok) {
        t.fail(`${what}: refused (${decision.code})`);
        return [];
      }
      account = decision.account;
      ledger.push(...decision.entries);
      t.same(balances(account), sumLedger(ledger), `${what}: the balances are the sum of the ledger`);
      return decision.entries;
    },
  };
}

t.test('an empty account holds nothing and its wallet is not active', async (t) => {
  t.same(emptyAccount(), {
    availableCredits: 0,
    reservedCredits: 0,
    walletCents: 0,
    reservedWalletCents: 0,
    walletActivated: false,
    tokenCarryNano: 0n,
    reservations: {},
  });
  t.same(sumLedger([]), balances(emptyAccount()));
});

t.test('credits: grant, reserve, capture; each step one ledger entry with every column', async (t) => {
  const b = book(t);
  t.same(b.apply(grant(b.account, 100, 'plan:1'), 'grant'), [
    { kind: 'grant', credits: 100, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, reference: 'plan:1' },
  ]);
  t.same(b.apply(reserve(b.account, 'gen_1', 30, 'credits', 5), 'reserve'), [
    { kind: 'reserve', generationId: 'gen_1', credits: -30, reservedCredits: 30, walletCents: -0, reservedWalletCents: 0 },
  ]);
  t.same(balances(b.account), { availableCredits: 70, reservedCredits: 30, walletCents: 0, reservedWalletCents: 0 });
  t.same(b.account.reservations, { gen_1: { credits: 30, walletCents: 0 } });
  t.same(b.apply(capture(b.account, 'gen_1'), 'capture'), [
    { kind: 'capture', generationId: 'gen_1', credits: 0, reservedCredits: -30, walletCents: 0, reservedWalletCents: -0 },
  ]);
  t.same(balances(b.account), { availableCredits: 70, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0 }, 'the credits are spent');
  t.same(b.account.reservations, {});
  t.same(b.apply(capture(b.account, 'gen_1'), 'second capture'), [], 'a second capture changes nothing');
  t.same(b.apply(release(b.account, 'gen_1'), 'release after capture'), [], 'nor does a release after it');
  t.same(balances(b.account), { availableCredits: 70, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0 });
});

t.test('release gives back what was held, once', async (t) => {
  const b = book(t);
  b.apply(grant(b.account, 50, 'g'), 'grant');
  b.apply(deposit(b.account, 2_000, 'dep'), 'deposit');
  b.apply(reserve(b.account, 'gen_1', 80, 'auto', 10), 'reserve 50 credits and 300 cents');
  t.same(balances(b.account), { availableCredits: 0, reservedCredits: 50, walletCents: 1_700, reservedWalletCents: 300 });
  t.same(b.apply(release(b.account, 'gen_1'), 'release'), [
    { kind: 'release', generationId: 'gen_1', credits: 50, reservedCredits: -50, walletCents: 300, reservedWalletCents: -300 },
  ]);
  t.same(balances(b.account), { availableCredits: 50, reservedCredits: 0, walletCents: 2_000, reservedWalletCents: 0 }, 'all of it is back');
  t.same(b.apply(release(b.account, 'gen_1'), 'second release'), [], 'a second release changes nothing');
  t.same(b.apply(capture(b.account, 'gen_1'), 'capture after release'), [], 'nor does a capture after it');
  t.same(balances(b.account), { availableCredits: 50, reservedCredits: 0, walletCents: 2_000, reservedWalletCents: 0 });
});

t.test('capture of a wallet reservation spends the cents', async (t) => {
  const b = book(t);
  b.apply(deposit(b.account, 5_000, 'dep'), 'deposit');
  t.same(b.apply(reserve(b.account, 'gen_1', 7, 'wallet', 12), 'reserve'), [
    { kind: 'reserve', generationId: 'gen_1', credits: -0, reservedCredits: 0, walletCents: -84, reservedWalletCents: 84 },
  ]);
  t.same(b.apply(capture(b.account, 'gen_1'), 'capture'), [
    { kind: 'capture', generationId: 'gen_1', credits: 0, reservedCredits: -0, walletCents: 0, reservedWalletCents: -84 },
  ]);
  t.same(balances(b.account), { availableCredits: 0, reservedCredits: 0, walletCents: 4_916, reservedWalletCents: 0 });
});

t.test('reserving twice for one generation holds once', async (t) => {
  const b = book(t);
  b.apply(grant(b.account, 100, 'g'), 'grant');
  b.apply(reserve(b.account, 'gen_1', 40, 'credits', 5), 'first');
  t.same(b.apply(reserve(b.account, 'gen_1', 40, 'credits', 5), 'again'), [], 'the second changes nothing');
  t.same(b.apply(reserve(b.account, 'gen_1', 90, 'credits', 5), 'again, another price'), [], 'whatever its price');
  t.same(balances(b.account), { availableCredits: 60, reservedCredits: 40, walletCents: 0, reservedWalletCents: 0 });
  const capped = reserveWithinCap(b.account, 'gen_1', 40, 'credits', 5, 0, { month: '2026-01', spentCents: 0 });
  t.ok(capped.ok && capped.entries.length === 0, 'also through the capped reserve');
});

t.test('credits mode: exactly enough passes, one short is insufficient_credits and changes nothing', async (t) => {
  const b = book(t);
  b.apply(grant(b.account, 30, 'g'), 'grant');
  const short = reserve(b.account, 'gen_1', 31, 'credits', 5);
  t.match(short, { ok: false, code: 'insufficient_credits', message: 'This job costs 31 credits; 30 are available.' });
  t.same(balances(b.account), { availableCredits: 30, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0 });
  t.same(b.account.reservations, {}, 'no reservation was recorded');
  b.apply(reserve(b.account, 'gen_1', 30, 'credits', 5), 'exactly enough');
  t.same(balances(b.account), { availableCredits: 0, reservedCredits: 30, walletCents: 0, reservedWalletCents: 0 });
  b.apply(reserve(b.account, 'gen_free', 0, 'credits', 5), 'a free job');
  t.same(b.account.reservations.gen_free, { credits: 0, walletCents: 0 });
});

t.test('wallet mode: needs an active wallet with enough cents; credits are not touched', async (t) => {
  const b = book(t);
  b.apply(grant(b.account, 1_000, 'g'), 'grant');
  t.match(reserve(b.account, 'gen_1', 1, 'wallet', 5), { ok: false, code: 'wallet_pending_minimum' }, 'no deposit yet');
  b.apply(deposit(b.account, 999, 'small'), 'a deposit under the minimum');
  t.equal(b.account.walletActivated, false, 'a deposit under the minimum does not activate the wallet');
  t.match(reserve(b.account, 'gen_1', 1, 'wallet', 5), { ok: false, code: 'wallet_pending_minimum' });
  b.apply(deposit(b.account, WALLET_MINIMUM_DEPOSIT_CENTS, 'min'), 'a deposit of the minimum');
  t.equal(b.account.walletActivated, true, 'a deposit of exactly the minimum activates it');
  b.apply(deposit(b.account, 1, 'tiny'), 'a small deposit later');
  t.equal(b.account.walletActivated, true, 'and a later small deposit does not deactivate it');
  t.same(balances(b.account), { availableCredits: 1_000, reservedCredits: 0, walletCents: 2_000, reservedWalletCents: 0 });
  t.match(reserve(b.account, 'gen_1', 401, 'wallet', 5), {
    ok: false,
    code: 'wallet_insufficient_balance',
    message: 'This job needs 2005 cents from the wallet; 2000 are available.',
  });
  b.apply(reserve(b.account, 'gen_1', 400, 'wallet', 5), 'exactly the balance');
  t.same(balances(b.account), { availableCredits: 1_000, reservedCredits: 0, walletCents: 0, reservedWalletCents: 2_000 }, 'credits untouched');
  t.same(b.account.reservations.gen_1, { credits: 0, walletCents: 2_000 });
  b.apply(reserve(b.account, 'gen_free', 0, 'wallet', 5), 'a free job needs no wallet money');
});

t.test('auto mode: credits first, the rest from the wallet; without a wallet it is insufficient_credits', async (t) => {
  const b = book(t);
  b.apply(grant(b.account, 10, 'g'), 'grant');
  b.apply(reserve(b.account, 'gen_1', 10, 'auto', 5), 'all from credits, no wallet needed');
  t.same(b.account.reservations.gen_1, { credits: 10, walletCents: 0 });
  b.apply(grant(b.account, 10, 'g2'), 'grant');
  t.match(reserve(b.account, 'gen_2', 11, 'auto', 5), {
    ok: false,
    code: 'insufficient_credits',
    message: 'This job costs 11 credits; 10 are available and the wallet is not active.',
  });
  b.apply(deposit(b.account, 1_000, 'dep'), 'deposit');
  b.apply(reserve(b.account, 'gen_2', 12, 'auto', 5), '10 credits and 10 cents');
  t.same(b.account.reservations.gen_2, { credits: 10, walletCents: 10 });
  t.same(balances(b.account), { availableCredits: 0, reservedCredits: 20, walletCents: 990, reservedWalletCents: 10 });
  t.match(reserve(b.account, 'gen_3', 199, 'auto', 5), { ok: false, code: 'wallet_insufficient_balance' }, '995 cents against 990');
  b.apply(reserve(b.account, 'gen_3', 198, 'auto', 5), '990 cents, exactly the balance');
  t.same(balances(b.account), { availableCredits: 0, reservedCredits: 20, walletCents: 0, reservedWalletCents: 1_000 });
});

t.test('prices, grants and deposits must be whole and not negative (grants and deposits positive)', async (t) => {
  const account = emptyAccount();
  t.throws(() => reserve(account, 'g', -1, 'credits', 5), /whole number of credits, got -1/);
  t.throws(() => reserve(account, 'g', 1.5, 'credits', 5), /got 1.5/);
  t.throws(() => reserveWithinCap(account, 'g', -1, 'credits', 5, null, { month: '2026-01', spentCents: 0 }), /got -1/);
  t.throws(() => grant(account, 0, 'r'), /positive whole number of credits, got 0/);
  t.throws(() => grant(account, -5, 'r'), /got -5/);
  t.throws(() => grant(account, 2.5, 'r'), /got 2.5/);
  t.throws(() => deposit(account, 0, 'r'), /positive whole number of cents, got 0/);
  t.throws(() => deposit(account, -1, 'r'), /got -1/);
  t.throws(() => deposit(account, 10.5, 'r'), /got 10.5/);
  t.same(balances(account), balances(emptyAccount()), 'nothing changed');
  t.ok(grant(account, 1, 'r').ok, 'one credit is a grant');
  t.ok(deposit(account, 1, 'r').ok, 'one cent is a deposit');
});

t.test('the capped reserve: the key cap and the monthly cap each count only the wallet part, boundaries included', async (t) => {
  const funded = () => {
    const b = book(t);
    b.apply(grant(b.account, 5, 'g'), 'grant');
    b.apply(deposit(b.account, 10_000, 'dep'), 'deposit');
    return b;
  };
  const month = { month: '2026-01', spentCents: 600 };
  const keyCap = (capCents: number, spentCents: number) => ({ capCents, spentCents, message: (n: number) => `key needs ${n}` });
  // 25 credits in auto: 5 from credits, 20 × 5 = 100 cents from the wallet.
  let b = funded();
  t.match(reserveWithinCap(b.account, 'gen_1', 25, 'auto', 5, 699, month), {
    ok: false,
    code: 'wallet_insufficient_balance',
    message: 'This job needs 100 cents from the wallet; the monthly spend cap of 699 cents leaves 99 this month.',
  });
  t.same(b.account.reservations, {}, 'a refusal records nothing');
  t.match(
    reserveWithinCap(b.account, 'gen_1', 25, 'auto', 5, 500, month),
    { ok: false, message: /leaves 0 this month/ },
    'a month already past its cap leaves 0, not less',
  );
  t.same(b.apply(reserveWithinCap(b.account, 'gen_1', 25, 'auto', 5, 700, month), 'exactly at the monthly cap'), [
    { kind: 'reserve', generationId: 'gen_1', credits: -5, reservedCredits: 5, walletCents: -100, reservedWalletCents: 100 },
  ]);

  b = funded();
  t.match(reserveWithinCap(b.account, 'gen_1', 25, 'auto', 5, null, month, keyCap(199, 100)), {
    ok: false,
    code: 'wallet_insufficient_balance',
    message: 'key needs 100',
  });
  b.apply(reserveWithinCap(b.account, 'gen_1', 25, 'auto', 5, null, month, keyCap(200, 100)), 'exactly at the key cap');
  t.same(b.account.reservations.gen_1, { credits: 5, walletCents: 100 });

  b = funded();
  t.match(
    reserveWithinCap(b.account, 'gen_1', 25, 'auto', 5, 10_000, month, keyCap(199, 100)),
    { ok: false, message: 'key needs 100' },
    'the key cap with a monthly cap too',
  );
  t.match(
    reserveWithinCap(b.account, 'gen_1', 25, 'auto', 5, 699, month, keyCap(10_000, 0)),
    { ok: false, message: /monthly spend cap/ },
    'the monthly cap with a key cap too',
  );

  b = funded();
  b.apply(
    reserveWithinCap(b.account, 'gen_1', 5, 'auto', 5, 0, { month: '2026-01', spentCents: 10_000 }, keyCap(0, 10_000)),
    'all from credits: no cap applies',
  );
  t.same(b.account.reservations.gen_1, { credits: 5, walletCents: 0 });
  t.match(
    reserveWithinCap(b.account, 'gen_2', 1, 'credits', 5, 0, month, keyCap(0, 0)),
    { ok: false, code: 'insufficient_credits' },
    'a refusal of the reservation itself comes first',
  );
});

t.test('a long run of mixed steps keeps every balance equal to its ledger and never negative', async (t) => {
  let seed = 7;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const b = book(t);
  const modes = ['credits', 'wallet', 'auto'] as const;
  for (let i = 0; i < 300; i++) {
    const step = random(6);
    const gen = `gen_${random(20)}`;
    const decision =
      step === 0
        ? grant(b.account, 1 + random(50), `g${i}`)
        : step === 1
          ? deposit(b.account, 1 + random(1_500), `d${i}`)
          : step === 2
            ? capture(b.account, gen)
            : step === 3
              ? release(b.account, gen)
              : reserve(b.account, gen, random(40), modes[random(3)]!, 1 + random(10));
    if (decision.ok) b.apply(decision, `step ${i}`);
    const a = b.account;
    if ([a.availableCredits, a.reservedCredits, a.walletCents, a.reservedWalletCents].some((n) => n < 0)) {
      t.fail(`step ${i}: a negative balance ${JSON.stringify(balances(a))}`);
      break;
    }
    const held = Object.values(a.reservations).reduce((sum, r) => ({ credits: sum.credits + r.credits, walletCents: sum.walletCents + r.walletCents }), {
      credits: 0,
      walletCents: 0,
    });
    if (held.credits !== a.reservedCredits || held.walletCents !== a.reservedWalletCents) {
      t.fail(`step ${i}: reserved balances ${a.reservedCredits}/${a.reservedWalletCents} but reservations hold ${held.credits}/${held.walletCents}`);
      break;
    }
  }
  t.same(balances(b.account), sumLedger(b.ledger), 'the balances are the sum of the ledger');
});

t.test('a single cent from the wallet is checked like any other amount', async (t) => {
  const account = emptyAccount();
  t.match(reserve(account, 'gen_1', 1, 'wallet', 1), { ok: false, code: 'wallet_pending_minimum' }, 'an inactive wallet pays not even one cent');
  const b = book(t);
  b.apply(deposit(b.account, WALLET_MINIMUM_DEPOSIT_CENTS, 'dep'), 'deposit');
  b.apply(reserve(b.account, 'gen_1', WALLET_MINIMUM_DEPOSIT_CENTS, 'wallet', 1), 'all of it');
  t.match(reserve(b.account, 'gen_2', 1, 'wallet', 1), { ok: false, code: 'wallet_insufficient_balance' }, 'an empty wallet pays not even one cent');
});

t.test('a new wallet: auto-recharge off with nothing set, no monthly cap', async (t) => {
  t.same(defaultWalletSettings(), { autoRecharge: { enabled: false, thresholdCents: 0, amountCents: 0 }, monthlySpendCapCents: null });
  t.equal(defaultWalletSettings().autoRecharge.thresholdCents, 0);
  t.equal(defaultWalletSettings().autoRecharge.amountCents, 0);
});

t.test('the caps apply from the first cent taken from the wallet', async (t) => {
  const b = book(t);
  b.apply(deposit(b.account, 5_000, 'dep'), 'deposit');
  const month = { month: '2026-01', spentCents: 0 };
  t.match(
    reserveWithinCap(b.account, 'gen_1', 1, 'wallet', 1, 0, month),
    { ok: false, code: 'wallet_insufficient_balance' },
    'a monthly cap of 0 refuses one cent',
  );
  const keyCap = { capCents: 0, spentCents: 0, message: (n: number) => `key needs ${n}` };
  t.match(reserveWithinCap(b.account, 'gen_1', 1, 'wallet', 1, null, month, keyCap), { ok: false, message: 'key needs 1' }, 'a key cap of 0 refuses one cent');
});

t.test("the month's spend moves with reservations and releases only", async (t) => {
  const b = book(t);
  const grants = b.apply(grant(b.account, 10, 'g'), 'grant');
  const deposits = b.apply(deposit(b.account, 2_000, 'dep'), 'deposit');
  const reserves = b.apply(reserve(b.account, 'gen_1', 30, 'auto', 10), 'reserve');
  const captures = b.apply(capture(b.account, 'gen_1'), 'capture');
  t.equal(spendChange(grants), 0, 'a grant');
  t.equal(spendChange(deposits), 0, 'a deposit');
  t.equal(spendChange(reserves), 200, 'a reservation of 200 cents');
  t.equal(spendChange(captures), 0, 'a capture (the money already left at the reservation)');
  b.apply(reserve(b.account, 'gen_2', 10, 'wallet', 10), 'reserve');
  t.equal(spendChange(b.apply(release(b.account, 'gen_2'), 'release')), -100, 'a release gives it back');
});

t.test('wallet settings at their boundaries', async (t) => {
  const settings = (autoRecharge: { enabled: boolean; thresholdCents: number; amountCents: number }, monthlySpendCapCents: number | null = null) => ({
    autoRecharge,
    monthlySpendCapCents,
  });
  t.equal(
    checkWalletSettings(settings({ enabled: true, thresholdCents: 1, amountCents: WALLET_MINIMUM_DEPOSIT_CENTS })),
    undefined,
    'a threshold of one cent and a recharge of the minimum',
  );
  t.equal(
    checkWalletSettings(settings({ enabled: false, thresholdCents: 100_000_000, amountCents: 100_000_000 }, 100_000_000)),
    undefined,
    '100000000 cents is allowed',
  );
  t.match(checkWalletSettings(settings({ enabled: false, thresholdCents: 100_000_001, amountCents: 0 })), /^autoRecharge\.thresholdCents: /, 'one more is not');
  t.match(checkWalletSettings(settings({ enabled: false, thresholdCents: 0, amountCents: 0 }, 100_000_001)), /^monthlySpendCapCents: /);
  t.match(
    checkWalletSettings(settings({ enabled: true, thresholdCents: 0, amountCents: WALLET_MINIMUM_DEPOSIT_CENTS })),
    /^autoRecharge\.thresholdCents: must be above 0/,
  );
  const active = deposit(emptyAccount(), WALLET_MINIMUM_DEPOSIT_CENTS, 'd');
  if (!active.ok) return t.fail('deposit refused');
  t.equal(
    needsAutoRecharge(active.account, settings({ enabled: true, thresholdCents: 5_000, amountCents: WALLET_MINIMUM_DEPOSIT_CENTS }), false),
    true,
    'a recharge of exactly the minimum is started',
  );
  t.equal(
    needsAutoRecharge(active.account, settings({ enabled: true, thresholdCents: 5_000, amountCents: WALLET_MINIMUM_DEPOSIT_CENTS - 1 }), false),
    false,
    'one cent less is not',
  );
});

import t, { type Test } from 'tap';
import {
  capture,
  deposit,
  emptyAccount,
  grant,
  release,
  reserve,
  sumLedger,
  type Account,
  type LedgerEntry,
  type MoneyDecision,
} from '../../domain/account.ts';

/** Applies a decision, keeping the ledger, and checks the invariant after every step. */
function book(t: Test, state: { account: Account; ledger: LedgerEntry[] }, decision: MoneyDecision): MoneyDecision {
  if (decision.ok) {
    state.account = decision.account;
    state.ledger.push(...decision.entries);
    // The token carry is a fraction of a credit not charged yet, not a balance of the ledger (docs/catalog.md#rounding).
    const { reservations: _r, walletActivated: _w, tokenCarryNano: _c, ...balances } = state.account;
    t.same(balances, sumLedger(state.ledger), 'balances equal the ledger sum');
    for (const value of Object.values(balances)) t.ok(value >= 0, 'no balance is negative');
  }
  return decision;
}

t.test('credits: reserve, capture, release, with refusals and idempotency', async (t) => {
  const s = { account: emptyAccount(), ledger: [] as LedgerEntry[] };
  book(t, s, grant(s.account, 100, 'plan:free:2026-01'));
  t.equal(s.account.availableCredits, 100);

  const refused = book(t, s, reserve(s.account, 'gen_big', 101, 'credits', 2));
  t.same(refused.ok ? null : refused.code, 'insufficient_credits');

  book(t, s, reserve(s.account, 'gen_1', 60, 'credits', 2));
  t.same([s.account.availableCredits, s.account.reservedCredits], [40, 60]);
  const again = book(t, s, reserve(s.account, 'gen_1', 60, 'credits', 2));
  t.same(again.ok && again.entries, [], 'reserving the same generation twice changes nothing');

  book(t, s, capture(s.account, 'gen_1'));
  t.same([s.account.availableCredits, s.account.reservedCredits], [40, 0], 'capture spends the reservation');
  t.same((book(t, s, capture(s.account, 'gen_1')) as { entries: unknown[] }).entries, [], 'second capture is a no-op');
  t.same((book(t, s, release(s.account, 'gen_1')) as { entries: unknown[] }).entries, [], 'release after capture is a no-op');

  book(t, s, reserve(s.account, 'gen_2', 40, 'credits', 2));
  t.equal(s.account.availableCredits, 0);
  book(t, s, release(s.account, 'gen_2'));
  t.same([s.account.availableCredits, s.account.reservedCredits], [40, 0], 'release gives it back');
  t.same((book(t, s, capture(s.account, 'gen_2')) as { entries: unknown[] }).entries, [], 'capture after release is a no-op');
  t.same(
    s.ledger.map((e) => e.kind),
    ['grant', 'reserve', 'capture', 'reserve', 'release'],
  );
});

t.test('wallet: pending minimum, insufficient balance, spend at the plan price per credit', async (t) => {
  const s = { account: emptyAccount(), ledger: [] as LedgerEntry[] };
  const pending = reserve(s.account, 'gen_w', 5, 'wallet', 3);
  t.same(pending.ok ? null : pending.code, 'wallet_pending_minimum');
  book(t, s, deposit(s.account, 500, 'dep_small'));
  t.notOk(s.account.walletActivated, 'a deposit under 10 dollars does not activate the wallet');
  book(t, s, deposit(s.account, 1_000, 'dep_1'));
  t.ok(s.account.walletActivated);
  const tooMuch = reserve(s.account, 'gen_w', 600, 'wallet', 3);
  t.same(tooMuch.ok ? null : tooMuch.code, 'wallet_insufficient_balance');
  book(t, s, reserve(s.account, 'gen_w', 5, 'wallet', 3));
  t.same([s.account.walletCents, s.account.reservedWalletCents], [1_485, 15]);
  book(t, s, capture(s.account, 'gen_w'));
  t.same([s.account.walletCents, s.account.reservedWalletCents], [1_485, 0]);
});

t.test('auto: credits first, the rest from the wallet', async (t) => {
  const s = { account: emptyAccount(), ledger: [] as LedgerEntry[] };
  book(t, s, grant(s.account, 4, 'g'));
  const noWallet = reserve(s.account, 'gen_a', 10, 'auto', 2);
  t.same(noWallet.ok ? null : noWallet.code, 'insufficient_credits', 'without an active wallet, auto is short of credits');
  book(t, s, deposit(s.account, 2_000, 'd'));
  book(t, s, reserve(s.account, 'gen_a', 10, 'auto', 2));
  t.same(s.account.reservations.gen_a, { credits: 4, walletCents: 12 });
  t.same([s.account.availableCredits, s.account.walletCents], [0, 1_988]);
  book(t, s, release(s.account, 'gen_a'));
  t.same([s.account.availableCredits, s.account.walletCents, s.account.reservedWalletCents], [4, 2_000, 0]);
  book(t, s, reserve(s.account, 'gen_b', 3, 'auto', 2));
  t.same(s.account.reservations.gen_b, { credits: 3, walletCents: 0 }, 'enough credits: the wallet is not touched');
});

t.test('bad amounts are programming errors, not refusals', async (t) => {
  t.throws(() => reserve(emptyAccount(), 'g', 1.5, 'credits', 1));
  t.throws(() => grant(emptyAccount(), 0, 'x'));
  t.throws(() => deposit(emptyAccount(), -5, 'x'));
});

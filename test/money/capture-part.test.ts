import t from 'tap';
import { capturePart, deposit, emptyAccount, grant, reserve, type Account, type MoneyDecision } from '../../domain/account.ts';

/**
 * A token-priced job captures part of what it reserved and releases the rest (domain/account.ts,
 * capturePart): entry by entry, for a reservation from credits alone, and the amounts it refuses as
 * programming errors. The mixed credits-and-wallet case is in test/unit/token-pricing.test.ts.
 */

const ok = (d: MoneyDecision) => {
  if (!d.ok) throw new Error(d.code);
  return d;
};

const rows = (d: MoneyDecision) => ok(d).entries.map((e) => [e.kind, e.credits, e.reservedCredits, e.walletCents, e.reservedWalletCents]);

/** An account of 10 credits holding 4 of them for gen_1. */
function holding(): { account: Account } {
  return { account: ok(reserve(ok(grant(emptyAccount(), 10, 'g')).account, 'gen_1', 4, 'credits', 5)).account };
}

t.test('from credits alone: the used part captured, the rest given back, no wallet cent moved', async (t) => {
  const { account } = holding();
  const part = capturePart(account, 'gen_1', 3, 4);
  t.same(rows(part), [
    ['capture', 0, -3, 0, 0],
    ['release', 1, -1, 0, 0],
  ]);
  const after = ok(part).account;
  t.same([after.availableCredits, after.reservedCredits, after.walletCents, after.reservedWalletCents], [7, 0, 0, 0]);
  t.same(after.reservations, {}, 'the reservation is gone');
});

t.test('nothing used: one release of everything; all used: one capture and no empty release', async (t) => {
  t.same(rows(capturePart(holding().account, 'gen_1', 0, 4)), [
    ['capture', 0, 0, 0, 0],
    ['release', 4, -4, 0, 0],
  ]);
  const all = capturePart(holding().account, 'gen_1', 4, 4);
  t.same(rows(all), [['capture', 0, -4, 0, 0]], 'the whole reservation may be captured, and nothing is left to release');
  t.equal(ok(all).account.availableCredits, 6);
});

t.test('a capture past the reservation, below zero or of a fraction is a programming error, and changes nothing', async (t) => {
  for (const credits of [5, -1, 1.5, Number.NaN]) {
    const { account } = holding();
    t.throws(() => capturePart(account, 'gen_1', credits, 4), /a capture must be a whole number of credits up to the 4 reserved/, `${credits}`);
    t.same(account.reservations.gen_1, { credits: 4, walletCents: 0 }, `${credits}: still held`);
  }
  t.same(rows(capturePart(holding().account, 'gen_2', 3, 4)), [], 'a generation holding nothing: nothing to capture');
});

t.test('a deposit is one deposit entry, with its reference', async (t) => {
  const d = ok(deposit(emptyAccount(), 2_500, 'dep:dep_1'));
  t.same(d.entries, [{ kind: 'deposit', credits: 0, reservedCredits: 0, walletCents: 2_500, reservedWalletCents: 0, reference: 'dep:dep_1' }]);
});

import t from 'tap';
import { describeLedgerEntry, type LedgerAmounts } from '../../domain/ledger-words.ts';

/**
 * The ledger in words (docs/money.md): the sentence the dashboard and GET /v1/ledger show for each entry. The
 * words are the behaviour here, so they are pinned whole; the common cases are in price-explained.test.ts.
 */

const none: LedgerAmounts = { kind: 'grant', credits: 0, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, generationId: null, reference: null };

t.test('a grant says where its credits came from', async (t) => {
  const grant = (reference: string | null, credits = 100) => describeLedgerEntry({ ...none, kind: 'grant', credits, reference });
  t.equal(grant('sub:sub_1:period:2026-06-01T00:00:00.000Z'), "100 credits added: the subscription period's credits.");
  t.equal(grant('plan:pro:opening'), "100 credits added: the plan's opening credits.");
  t.equal(grant('top:top_9'), '100 credits added: a credit top-up (top_9).');
  t.equal(grant('manual:ops-1'), '100 credits added: a grant.', 'any other reference');
  t.equal(grant(null, 1), '1 credit added: a grant.', 'no reference, and one credit is singular');
});

t.test('a deposit names its payment when it has one', async (t) => {
  t.equal(describeLedgerEntry({ ...none, kind: 'deposit', walletCents: 1_005, reference: 'dep:dep_2' }), '$10.05 deposited into the wallet (dep_2).');
  t.equal(describeLedgerEntry({ ...none, kind: 'deposit', walletCents: 1_000 }), '$10.00 deposited into the wallet.');
  t.equal(describeLedgerEntry({ ...none, kind: 'deposit', walletCents: 50, reference: 'card' }), '$0.50 deposited into the wallet (card).');
});

t.test('holds, charges and releases say both parts, without signs, or nothing', async (t) => {
  const job = { ...none, generationId: 'gen_7' };
  t.equal(
    describeLedgerEntry({ ...job, kind: 'reserve', walletCents: -250, reservedWalletCents: 250 }),
    '$2.50 held for generation gen_7 while it runs (its most it can cost); not spent yet.',
    'a hold from the wallet alone',
  );
  t.equal(
    describeLedgerEntry({ ...job, kind: 'reserve', credits: -2, reservedCredits: 2, walletCents: -10, reservedWalletCents: 10 }),
    '2 credits and $0.10 held for generation gen_7 while it runs (its most it can cost); not spent yet.',
  );
  t.equal(
    describeLedgerEntry({ ...job, kind: 'reserve' }),
    'nothing held for generation gen_7 while it runs (its most it can cost); not spent yet.',
    'a free job holds nothing',
  );
  t.equal(
    describeLedgerEntry({ ...job, kind: 'capture', reservedWalletCents: -75 }),
    '$0.75 charged for generation gen_7, taken from what was held.',
    'a charge from the wallet alone is not "nothing"',
  );
  t.equal(
    describeLedgerEntry({ ...job, kind: 'release', credits: 1, reservedCredits: -1, walletCents: 20, reservedWalletCents: -20 }),
    '1 credit and $0.20 given back: the unused part of what was held for generation gen_7.',
  );
  t.equal(
    describeLedgerEntry({ ...none, kind: 'release', credits: 2, reservedCredits: -2 }),
    '2 credits given back: the unused part of what was held for a generation.',
    'an entry without its generation',
  );
});

t.test('a kind it does not know is named as it is', async (t) => {
  t.equal(describeLedgerEntry({ ...none, kind: 'adjustment', credits: 5 }), 'adjustment entry.');
});

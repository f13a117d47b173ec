import t from 'tap';
import { exactNano, inputTokenBound, NANO, reservationOf, tokenCharge, tokenTermsOf, type TokenTerms } from '../../domain/catalog/pricing.ts';
import { capturePart, emptyAccount, grant, reserve, sumLedger, type MoneyDecision } from '../../domain/account.ts';

function ok(decision: MoneyDecision): Extract<MoneyDecision, { ok: true }> {
  if (!decision.ok) throw new Error(decision.message);
  return decision;
}

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = s;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296;
  };
}

t.test('a reservation is the most a job can cost, rounded up', async (t) => {
  const price = { per: 'tokens' as const, inputPer1k: 0.25, outputPer1k: 2 };
  // 'héllo' is 6 bytes, plus 8 tokens of overhead: 14 input tokens at most; 1000 output tokens.
  t.equal(inputTokenBound({ prompt: 'héllo' }), 14);
  t.equal(inputTokenBound({ prompt: 'a', systemPrompt: 'bb' }), 11);
  t.equal(reservationOf(price, { prompt: 'héllo', maxTokens: 1000 }), 3, '14 × 0.25/1k + 1000 × 2/1k = 2.0035, up to 3');
  t.equal(reservationOf(price, { prompt: '', maxTokens: 500 }), 2, '8 × 0.25/1k + 500 × 2/1k = 1.002, up to 2');
  t.equal(reservationOf({ per: 'tokens', inputPer1k: 0, outputPer1k: 1 }, { prompt: 'x', maxTokens: 1000 }), 1, 'exactly one credit stays one');
  t.equal(exactNano(tokenTermsOf(price), { inputTokens: 1000, outputTokens: 1000 }), 2_250_000_000n, 'billionths, exact');
});

t.test('fewer tokens than reserved, exactly as many, and more: capped at the reservation', async (t) => {
  const terms: TokenTerms = { inputMicroPer1k: 1_000_000, outputMicroPer1k: 3_000_000 };
  t.same(
    tokenCharge(terms, { inputTokens: 100, outputTokens: 200 }, 5, 0n),
    { credits: 0, carryNano: 700_000_000n, capped: false },
    '0.7: nothing yet, carried',
  );
  t.same(tokenCharge(terms, { inputTokens: 100, outputTokens: 200 }, 5, 700_000_000n), { credits: 1, carryNano: 400_000_000n, capped: false }, '0.7 + 0.7');
  t.same(tokenCharge(terms, { inputTokens: 2000, outputTokens: 1000 }, 5, 0n), { credits: 5, carryNano: 0n, capped: false }, 'exactly the reservation');
  t.same(
    tokenCharge(terms, { inputTokens: 2000, outputTokens: 1000 }, 5, 999_999_999n),
    { credits: 5, carryNano: 999_999_999n, capped: false },
    'the carry stays when it does not reach a credit',
  );
  t.same(
    tokenCharge(terms, { inputTokens: 9000, outputTokens: 9000 }, 5, 0n),
    { credits: 5, carryNano: 0n, capped: true },
    'more than reserved: the reservation, no more',
  );
  t.same(
    tokenCharge(terms, { inputTokens: -5, outputTokens: Number.NaN }, 5, 0n),
    { credits: 0, carryNano: 0n, capped: false },
    'nonsense counts are no usage',
  );
});

t.test('no rounding favours the service by a credit on one job, nor drifts over many', async (t) => {
  const next = random(20261127);
  for (const [inputPer1k, outputPer1k] of [
    [0.15, 0.6],
    [0.000001, 0.000003],
    [2.5, 10],
    [0.333333, 0.777777],
    [1, 1],
  ] as const) {
    const terms = tokenTermsOf({ per: 'tokens', inputPer1k, outputPer1k });
    let carry = 0n;
    let charged = 0n;
    let exact = 0n;
    let worst = 0n;
    for (let job = 0; job < 20_000; job++) {
      const maxTokens = 1 + Math.floor(next() * 4000);
      const prompt = 'x'.repeat(Math.floor(next() * 300));
      const reserved = reservationOf({ per: 'tokens', inputPer1k, outputPer1k }, { prompt, maxTokens });
      const usage = { inputTokens: Math.floor(next() * inputTokenBound({ prompt })), outputTokens: Math.floor(next() * (maxTokens + 1)) };
      const cost = exactNano(terms, usage);
      const charge = tokenCharge(terms, usage, reserved, carry);
      if (charge.capped) return t.fail('a usage within its bounds never passes its reservation');
      const over = BigInt(charge.credits) * NANO - cost;
      if (over > worst) worst = over;
      if (charge.credits > reserved) return t.fail('charged more than reserved');
      carry = charge.carryNano;
      charged += BigInt(charge.credits);
      exact += cost;
    }
    t.ok(worst < NANO, `${inputPer1k}/${outputPer1k}: one job is charged under a credit above its exact cost (worst ${worst} billionths)`);
    t.ok(
      charged * NANO <= exact && exact - charged * NANO < NANO,
      `${inputPer1k}/${outputPer1k}: over 20,000 jobs the total charged is the exact total rounded down (${charged} for ${exact} billionths)`,
    );
    t.equal(exact - charged * NANO, carry, 'and what is not charged yet is exactly the carry');
  }
});

t.test('a part captured, the rest released: from the reserved credits first, then the wallet at its reserved rate; the ledger adds up', async (t) => {
  let account = ok(grant(emptyAccount(), 3, 'g')).account;
  account = { ...account, walletActivated: true, walletCents: 1000 };
  const held = reserve(account, 'gen_1', 10, 'auto', 4);
  t.ok(held.ok);
  if (!held.ok) return;
  t.same(held.account.reservations.gen_1, { credits: 3, walletCents: 28 }, '3 credits, 7 from the wallet at 4 cents');
  const part = capturePart(held.account, 'gen_1', 5, 10);
  t.ok(part.ok);
  if (!part.ok) return;
  t.same(
    part.entries.map((e) => [e.kind, e.credits, e.reservedCredits, e.walletCents, e.reservedWalletCents]),
    [
      ['capture', 0, -3, 0, -8],
      ['release', 0, 0, 20, -20],
    ],
  );
  t.same(
    {
      credits: part.account.availableCredits,
      reserved: part.account.reservedCredits,
      wallet: part.account.walletCents,
      reservedWallet: part.account.reservedWalletCents,
    },
    { credits: 0, reserved: 0, wallet: 992, reservedWallet: 0 },
    '5 credits spent: 3 held credits and 2 at 4 cents',
  );
  const ledger = sumLedger([...ok(grant(emptyAccount(), 3, 'g')).entries, ...held.entries, ...part.entries]);
  t.same(ledger, { availableCredits: 0, reservedCredits: 0, walletCents: -8, reservedWalletCents: 0 }, 'the ledger moved the wallet by the 8 cents spent');
  t.same(ok(capturePart(part.account, 'gen_1', 1, 10)).entries, [], 'a second capture changes nothing');
  const small = reserve(ok(grant(emptyAccount(), 10, 'g')).account, 'gen_2', 4, 'credits', 5);
  if (!small.ok) return t.fail();
  t.throws(() => capturePart(small.account, 'gen_2', 5, 4), /up to the 4 reserved/);
  const none = capturePart(small.account, 'gen_2', 0, 4);
  t.ok(none.ok && none.account.availableCredits === 10, 'nothing used: everything back');
});

import t from 'tap';
import { creditsOfNano, routeOf } from '../../http/routes/generations/explain.ts';
import { describeLedgerEntry } from '../../domain/ledger-words.ts';
import { generationRow } from '../generations/support.ts';

t.test('creditsOfNano writes billionths of a credit as a decimal of credits', async (t) => {
  t.equal(creditsOfNano(0n), '0');
  t.equal(creditsOfNano(85_000_000n), '0.085');
  t.equal(creditsOfNano(3_000_000_000n), '3');
  t.equal(creditsOfNano(1_000_000_001n), '1.000000001');
  t.equal(creditsOfNano(-250_000_000n), '-0.25');
});

t.test('routeOf: each reroute of the timeline is a failed attempt, the last one is on the deployment it holds', async (t) => {
  const row = generationRow('ws_1', {
    status: 'succeeded',
    deploymentId: 'text-backup',
    provider: 'openai',
    attempts: 2,
    startedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 2)),
    timeline: [
      { status: 'queued', at: '2026-01-01T00:00:00.000Z' },
      { status: 'reserved', at: '2026-01-01T00:00:00.000Z' },
      { status: 'submitted', at: '2026-01-01T00:00:00.500Z' },
      { status: 'reserved', at: '2026-01-01T00:00:01.000Z', detail: 'attempt on text-main failed: provider_unavailable: 503 upstream; trying text-backup' },
      { status: 'running', at: '2026-01-01T00:00:02.000Z' },
      { status: 'succeeded', at: '2026-01-01T00:00:03.000Z' },
    ],
  });
  const route = routeOf(row, (id) => (id === 'text-main' ? 'replicate' : undefined));
  t.same(route, {
    deploymentId: 'text-backup',
    provider: 'openai',
    attempts: [
      {
        number: 1,
        deploymentId: 'text-main',
        provider: 'replicate',
        outcome: 'failed',
        detail: 'provider_unavailable: 503 upstream',
        at: '2026-01-01T00:00:01.000Z',
      },
      { number: 2, deploymentId: 'text-backup', provider: 'openai', outcome: 'succeeded', at: '2026-01-01T00:00:03.000Z' },
    ],
  });
  t.same(routeOf(generationRow('ws_1', { status: 'queued' }), () => undefined).attempts, [], 'a queued job has made no attempt');
});

t.test('the ledger in words', async (t) => {
  const entry = { credits: 0, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, generationId: 'gen_1', reference: null };
  t.equal(
    describeLedgerEntry({ ...entry, kind: 'reserve', credits: -4, reservedCredits: 4 }),
    '4 credits held for generation gen_1 while it runs (its most it can cost); not spent yet.',
  );
  t.equal(
    describeLedgerEntry({ ...entry, kind: 'capture' }),
    "generation gen_1 charged nothing: its cost was below one credit and went into the workspace's token carry.",
  );
  t.equal(
    describeLedgerEntry({ ...entry, kind: 'capture', reservedCredits: -1, reservedWalletCents: -5 }),
    '1 credit and $0.05 charged for generation gen_1, taken from what was held.',
  );
  t.equal(
    describeLedgerEntry({ ...entry, kind: 'release', credits: 3, reservedCredits: -3 }),
    '3 credits given back: the unused part of what was held for generation gen_1.',
  );
  t.equal(
    describeLedgerEntry({ ...entry, kind: 'grant', credits: 100, generationId: null, reference: 'plan:free:opening' }),
    "100 credits added: the plan's opening credits.",
  );
  t.equal(
    describeLedgerEntry({ ...entry, kind: 'grant', credits: 500, generationId: null, reference: 'top:top_1' }),
    '500 credits added: a credit top-up (top_1).',
  );
  t.equal(
    describeLedgerEntry({ ...entry, kind: 'deposit', walletCents: 2500, generationId: null, reference: 'dep:dep_1' }),
    '$25.00 deposited into the wallet (dep_1).',
  );
});

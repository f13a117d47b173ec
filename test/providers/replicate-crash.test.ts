import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import type { TestServer } from '../helpers/server.ts';
import { serveDurable, withDatabase } from './crash-support.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, waitFor } from '../generations/flow.ts';
import { png, SECRET, startReplicateFake, TOKEN, VERSION } from '../fakes/replicate.ts';

/**
 * kill -9 of the real server with Replicate jobs at every phase: a create in flight (the provider never
 * answered), a prediction accepted and starting, one processing, and one that finished while the service
 * was down. After the restart each is followed to its end, and the fake has accepted exactly one create per
 * job: a job whose prediction id was written is looked up, never submitted again. Every job settles once,
 * and the balance equals the ledger. PGlite on disk, or PostgreSQL when TEST_DATABASE_URL is set.
 */
const storage = await durableStorage(t, 'gs-replicate-crash-');
const fake = await startReplicateFake({ token: TOKEN, webhookSecret: SECRET });
t.teardown(() => fake.close());
fake.scenario(`version:${VERSION}`, { advance: 'manual', end: { status: 'succeeded', output: [fake.file('out.png', png(32, 16))] } });

const catalogDir = mkdtempSync(path.join(tmpdir(), 'gs-catalog-'));
const catalogFile = path.join(catalogDir, 'catalog.json');
writeFileSync(
  catalogFile,
  JSON.stringify({
    defaultPlan: 'free',
    plans: [
      {
        id: 'free',
        name: 'Free',
        monthlyPriceCents: 0,
        monthlyCredits: 100,
        centsPerCredit: 5,
        concurrentJobs: 10,
        storageBytes: 1e9,
        maxFileBytes: 1e7,
        requestsPerMinute: 6000,
      },
    ],
    models: [
      {
        id: 'acme/painter',
        name: 'Painter',
        mode: 'text_to_image',
        maker: 'acme',
        description: 'Paints on Replicate.',
        price: { per: 'image', credits: 7 },
        plans: ['free'],
        parameters: { prompt: { required: true }, aspectRatio: {} },
        sample: { prompt: 'x', note: 'n' },
        deployments: [
          {
            id: 'painter-replicate',
            provider: 'replicate',
            target: { version: VERSION },
            input: { aspectRatio: { width: 'width', height: 'height', longSide: 512 } },
          },
        ],
      },
    ],
  }),
);

function serve() {
  return serveDurable(t, storage, catalogFile, {
    // A public HTTPS address (Replicate sends webhooks only there); this test calls the service on loopback.
    BASE_URL: 'https://gen.example.com',
    REPLICATE_API_TOKEN: TOKEN,
    REPLICATE_BASE_URL: fake.baseUrl,
    REPLICATE_WEBHOOK_SECRET: SECRET,
    // The job whose create hung (no prediction made) waits this long for an event before it is created again.
    REPLICATE_RESUBMIT_GRACE_MS: '1000',
    PROVIDER_POLL_MS: '50',
  });
}

const withDb = <T>(fn: Parameters<typeof withDatabase<T>>[1]) => withDatabase(storage, fn);

const predictionOf = (prompt: string) => fake.creates.find((c) => (c.body.input as { prompt?: string }).prompt === prompt)?.predictionId;

t.test('after kill -9 at every phase of a Replicate job, each is followed to its end with one submission, and the money is exact', async (t) => {
  const first = await serve();
  const client = first.client as TestServer;
  const user = await signUp(client);
  const { key } = await createKey(client, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
  const create = async (prompt: string) => {
    const created = await createGeneration(client, key, user.workspaceId, {
      mode: 'text_to_image',
      model: 'acme/painter',
      params: { prompt, aspectRatio: '16:9' },
    });
    t.equal(created.status, 201, JSON.stringify(created.body));
    return created.body.id as string;
  };

  // Three predictions accepted; then the fourth job's create never gets an answer.
  const starting = await create('starting at the kill');
  const processing = await create('processing at the kill');
  const finished = await create('finished while the service was down');
  for (const id of [starting, processing, finished]) await waitFor(client, key, user.workspaceId, id, (g) => g.status === 'submitted', 'submitted');
  fake.advance(predictionOf('processing at the kill')!);
  await waitFor(client, key, user.workspaceId, processing, (g) => g.status === 'running', 'running');
  fake.misbehave('create', { hang: true });
  const inFlight = await create('create in flight at the kill');
  await waitFor(client, key, user.workspaceId, inFlight, (g) => g.status === 'reserved' || g.status === 'submitted', 'handed over');
  const firstCreates = fake.creates.length;
  t.equal(firstCreates, 3, 'three creates answered before the kill');

  first.child.proc.kill('SIGKILL');
  t.same(await first.child.exited, { code: null, signal: 'SIGKILL' });
  // The provider goes on while the service is down: one prediction finishes.
  fake.advance(predictionOf('finished while the service was down')!);
  fake.advance(predictionOf('finished while the service was down')!);
  fake.calm();

  const before = await withDb((query) =>
    query<{ id: string; status: string; provider_job_id: string | null; attempts: number }>(
      'select id, status, provider_job_id, attempts from generations where workspace_id = ? order by created_at',
      [user.workspaceId],
    ),
  );
  t.same(
    before.map((r) => [r.status, r.provider_job_id !== null]),
    [
      ['submitted', true],
      ['running', true],
      ['submitted', true],
      ['reserved', false],
    ],
    'the prediction ids of the accepted jobs were written before the kill; the job whose create got no answer has none',
  );

  const second = await serve();
  const again = second.client as TestServer;
  // The job whose create was lost is handed over again: its prediction is the one new create.
  await waitFor(again, key, user.workspaceId, inFlight, (g) => g.status === 'submitted', 'submitted again');
  for (const prompt of ['starting at the kill', 'processing at the kill', 'create in flight at the kill']) {
    const id = predictionOf(prompt)!;
    while (fake.prediction(id)?.status !== 'succeeded') fake.advance(id);
  }
  const done = [];
  for (const id of [starting, processing, finished, inFlight]) done.push(await waitFor(again, key, user.workspaceId, id, isTerminal, 'a terminal state'));
  t.same(
    done.map((g) => g.status),
    ['succeeded', 'succeeded', 'succeeded', 'succeeded'],
    JSON.stringify(done.map((g) => [g.status, g.errorCode, g.errorMessage])),
  );
  for (const prompt of ['starting at the kill', 'processing at the kill', 'finished while the service was down', 'create in flight at the kill']) {
    t.equal(fake.submissions(prompt), 1, `${prompt}: one create at Replicate`);
  }
  t.equal(fake.creates.length, 4, 'four creates in all');
  const followed = done.slice(0, 3).map((g) => g.timeline.some((e) => e.detail === 'followed at its provider after a restart'));
  t.same(followed, [true, true, true], 'the accepted ones were followed, not resubmitted');
  for (const g of done) t.equal(g.outputAssetIds.length, 1, `${g.id}: its image stored`);

  second.child.proc.kill('SIGTERM');
  await second.child.exited;
  await withDb(async (query) => {
    const money = await moneyOf(query, user.workspaceId);
    t.same(
      money,
      { available: 72, reserved: 0, ledgerAvailable: 72, ledgerReserved: 0, reservations: [] },
      '4 × 7 credits captured once each; nothing left reserved; the ledger agrees',
    );
    const ledger = await ledgerByGeneration(query, user.workspaceId);
    for (const id of [starting, processing, finished, inFlight]) t.same(ledger[id], { reserve: 1, capture: 1 }, `${id}: reserved once, captured once`);
  });
});

import t from 'tap';
import { randomBytes } from 'node:crypto';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { PLAN_CREDITS, providerCatalogFile } from '../helpers/provider-catalog.ts';
import { serveDurable, withDatabase } from './crash-support.ts';
import { startFakeFal } from '../fakes/fal.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, waitFor, type Gen } from '../generations/flow.ts';

/**
 * kill -9 of the real server with fal requests accepted by the queue at every phase: in the queue, in
 * progress, and completed while the service was down. After the restart each job is followed by its
 * request's status URL (rebuilt from the provider job id `{app}:{request_id}`), never submitted again:
 * the fake counts one submission per job. Every job settles once, and the balance equals the ledger.
 * PGlite on disk, or PostgreSQL (and Redis) when TEST_DATABASE_URL (and TEST_REDIS_URL) are set.
 */
const storage = await durableStorage(t, 'gs-fal-crash-');
const KEY = 'fake-key-id-0003:fake-key-secret-crash0123456789';
let served = 0;
const fake = await startFakeFal({
  key: KEY,
  endpoints: {
    'fal-ai/flux/dev': {
      required: ['prompt'],
      result: (input, f) => {
        const size = Number(input.image_size === 'square' ? 30 : 31);
        return {
          images: [{ url: f.host(`out-${++served}.png`, makePng(size, size)), content_type: 'image/png', width: size, height: size }],
          seed: 1,
          prompt: input.prompt,
        };
      },
    },
  },
});
t.teardown(() => fake.close());

const catalogFile = providerCatalogFile(t, [
  {
    id: 'acme/flux',
    mode: 'text_to_image',
    credits: 5,
    parameters: { prompt: { required: true } },
    deployment: { id: 'flux-fal', provider: 'fal', target: { endpoint: 'fal-ai/flux/dev' }, input: { fixed: { image_size: 'square' } } },
  },
]);
const redisPrefix = `gs-fal-crash-${randomBytes(4).toString('hex')}:`;

function serve() {
  return serveDurable(t, storage, catalogFile, { FAL_KEY: KEY, FAL_QUEUE_URL: fake.url, PROVIDER_POLL_MS: '50' }, redisPrefix);
}

const withDb = <T>(fn: Parameters<typeof withDatabase<T>>[1]) => withDatabase(storage, fn);

const requestOf = (prompt: string) => [...fake.requests.values()].find((r) => r.input.prompt === prompt)!;

t.test(
  'after kill -9 with fal requests queued, in progress and completed while down, each is followed by its status URL with one submission, and the money is exact',
  async (t) => {
    const first = await serve();
    const client = first.client;
    const user = await signUp(client);
    const { key } = await createKey(client, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
    const create = async (prompt: string) => {
      // Each request stays in its phase until the test moves it.
      fake.script({ hold: true });
      const created = await createGeneration(client, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/flux', params: { prompt } });
      t.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.id as string;
      await waitFor(client, key, user.workspaceId, id, (g) => g.status === 'submitted', 'submitted');
      return id;
    };

    const queued = await create('in the queue at the kill');
    const inProgress = await create('in progress at the kill');
    const completed = await create('completed while the service was down');
    for (const prompt of ['in progress at the kill', 'completed while the service was down']) await fake.advance(requestOf(prompt).id, 'IN_PROGRESS');
    for (const id of [inProgress, completed]) await waitFor(client, key, user.workspaceId, id, (g) => g.status === 'running', 'running');
    t.equal(fake.submissions, 3, 'three submissions before the kill');

    first.child.proc.kill('SIGKILL');
    t.same(await first.child.exited, { code: null, signal: 'SIGKILL' });
    // fal goes on while the service is down: one request completes.
    await fake.advance(requestOf('completed while the service was down').id, 'COMPLETED');

    const before = await withDb((query) =>
      query<{ status: string; provider_job_id: string }>('select status, provider_job_id from generations where workspace_id = ? order by created_at', [
        user.workspaceId,
      ]),
    );
    t.same(
      before,
      ['in the queue at the kill', 'in progress at the kill', 'completed while the service was down'].map((prompt, i) => ({
        status: i === 0 ? 'submitted' : 'running',
        provider_job_id: `fal-ai/flux:${requestOf(prompt).id}`,
      })),
      "each job's provider id, {app}:{request_id}, was written before the kill",
    );

    const second = await serve();
    const again = second.client;
    // The completed one settles from its first status poll; the others are moved on once followed again.
    const statusCalls = (prompt: string) => fake.calls.filter((c) => c.startsWith(`GET /fal-ai/flux/requests/${requestOf(prompt).id}/status`)).length;
    const polledBefore = statusCalls('in the queue at the kill');
    await waitFor(
      again,
      key,
      user.workspaceId,
      inProgress,
      (g) => g.timeline.some((e) => e.detail === 'followed at its provider after a restart'),
      'followed again',
    );
    await waitFor(again, key, user.workspaceId, queued, () => statusCalls('in the queue at the kill') > polledBefore, 'polled again');
    await fake.advance(requestOf('in progress at the kill').id, 'COMPLETED');
    await fake.advance(requestOf('in the queue at the kill').id, 'IN_PROGRESS');
    await waitFor(again, key, user.workspaceId, queued, (g) => g.status === 'running', 'running');
    await fake.advance(requestOf('in the queue at the kill').id, 'COMPLETED');

    const done: Gen[] = [];
    for (const id of [queued, inProgress, completed]) done.push(await waitFor(again, key, user.workspaceId, id, isTerminal, 'a terminal state'));
    t.same(
      done.map((g) => g.status),
      ['succeeded', 'succeeded', 'succeeded'],
      JSON.stringify(done.map((g) => [g.status, g.errorCode, g.errorMessage])),
    );
    for (const g of done) {
      t.equal(g.outputAssetIds.length, 1, `${g.id}: its image stored`);
      t.ok(
        g.timeline.some((e) => e.detail === 'followed at its provider after a restart'),
        `${g.id}: followed, not resubmitted`,
      );
    }
    t.equal(fake.submissions, 3, 'one submission per job: none after the restart');
    t.same(fake.submissionsByEndpoint.get('fal-ai/flux/dev'), 3);
    t.same(fake.cancels, [], 'nothing cancelled');
    for (const prompt of ['in the queue at the kill', 'in progress at the kill', 'completed while the service was down']) {
      t.ok(fake.calls.includes(`GET /fal-ai/flux/requests/${requestOf(prompt).id}`), `${prompt}: its result read at the response URL`);
    }

    second.child.proc.kill('SIGTERM');
    await second.child.exited;
    await withDb(async (query) => {
      const left = PLAN_CREDITS - 3 * 5;
      t.same(
        await moneyOf(query, user.workspaceId),
        { available: left, reserved: 0, ledgerAvailable: left, ledgerReserved: 0, reservations: [] },
        '3 × 5 credits captured once each; nothing left reserved; the ledger agrees',
      );
      const ledger = await ledgerByGeneration(query, user.workspaceId);
      for (const id of [queued, inProgress, completed]) t.same(ledger[id], { reserve: 1, capture: 1 }, `${id}: reserved once, captured once`);
      const [asset] = await query<{ width: number; content_type: string }>('select width, content_type from assets where source_generation_id = ?', [
        completed,
      ]);
      t.same(asset, { width: 30, content_type: 'image/png' }, 'the image fal made, fetched and decoded');
    });
  },
);

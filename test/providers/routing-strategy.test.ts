import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, serverQuery, waitFor } from '../generations/flow.ts';

/** A model's strategy, from its catalog entry, chooses each new job's deployment (docs/routing.md). */
const dir = mkdtempSync(path.join(tmpdir(), 'gs-strategy-'));
const file = path.join(dir, 'catalog.json');
const model = (id: string, strategy: string, deployments: Array<Record<string, unknown>>) => ({
  id,
  name: id,
  mode: 'text_to_text',
  maker: 'acme',
  description: 'Two deployments.',
  price: { per: 'job', credits: 1 },
  plans: ['free'],
  parameters: { prompt: { required: true } },
  sample: { prompt: 'x', note: 'n' },
  routing: { strategy },
  deployments,
});
writeFileSync(
  file,
  JSON.stringify({
    defaultPlan: 'free',
    plans: [
      {
        id: 'free',
        name: 'Free',
        monthlyPriceCents: 0,
        monthlyCredits: 1000,
        centsPerCredit: 5,
        concurrentJobs: 100,
        storageBytes: 1e9,
        maxFileBytes: 1e7,
        requestsPerMinute: 60000,
      },
    ],
    models: [
      model('acme/ordered', 'order', [
        { id: 'o-first', provider: 'local' },
        { id: 'o-second', provider: 'local' },
      ]),
      model('acme/weighted', 'weighted', [
        { id: 'w-light', provider: 'local', weight: 1 },
        { id: 'w-heavy', provider: 'local', weight: 3 },
      ]),
      model('acme/limited', 'order', [{ id: 'limited-one', provider: 'local', limits: { concurrency: 1 } }]),
      model('acme/metered', 'order', [
        { id: 'm-slow', provider: 'local', limits: { requestsPerMinute: 2 } },
        { id: 'm-spare', provider: 'local' },
      ]),
      model('acme/spread', 'least-busy', [
        { id: 'l-a', provider: 'local' },
        { id: 'l-b', provider: 'local' },
      ]),
    ],
  }),
);
// Jobs stay at the local provider for a minute: each one created is in flight while the next is placed.
const server = await startTestServer(t, { env: { CATALOG_FILE: file, LOCAL_PROVIDER_LATENCY_MS: '60000' } });
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
const query = serverQuery(server);
const deploymentOf = async (id: string) =>
  (await query<{ deployment_id: string }>('select deployment_id from generations where id = ?', [id]))[0]!.deployment_id;
const place = async (modelId: string, n: number) => {
  const placed: string[] = [];
  for (let i = 0; i < n; i++) {
    const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: modelId, params: { prompt: `job ${i}` } });
    t.equal(created.status, 201, JSON.stringify(created.body));
    await waitFor(server, key, user.workspaceId, created.body.id, (g) => g.status === 'submitted' || g.status === 'running', 'at its provider');
    placed.push(await deploymentOf(created.body.id));
  }
  return placed;
};

t.test('order: the first deployment', async (t) => {
  t.same(await place('acme/ordered', 3), ['o-first', 'o-first', 'o-first']);
});

t.test('least busy: the one with fewer jobs in flight, ties by order', async (t) => {
  t.same(await place('acme/spread', 4), ['l-a', 'l-b', 'l-a', 'l-b']);
});

t.test('weighted: both used, the heavier more (weights 1 and 3 over 40 jobs)', async (t) => {
  const placed = await place('acme/weighted', 40);
  const heavy = placed.filter((d) => d === 'w-heavy').length;
  // Random draws: with weights 1 and 3 the chance of either bound failing is about two in a hundred thousand.
  t.ok(heavy > 18 && heavy < 40, `w-heavy got ${heavy} of 40`);
});

t.test('a deployment with a concurrency of its own: one job at a time there, the others queued, other deployments unaffected', async (t) => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'acme/limited', params: { prompt: `limited ${i}` } });
    t.equal(created.status, 201, JSON.stringify(created.body));
    ids.push(created.body.id);
  }
  await waitFor(server, key, user.workspaceId, ids[0]!, (g) => g.status === 'submitted' || g.status === 'running', 'at its provider');
  const statuses = await query<{ id: string; status: string }>(`select id, status from generations where id in (?, ?, ?) order by created_at`, ids);
  t.same(
    statuses.map((r) => r.status === 'queued'),
    [false, true, true],
    "the first holds the deployment's one slot; the others wait",
  );
  // The shared local kind has no limit: another model's job starts at once.
  t.same(await place('acme/ordered', 1), ['o-first'], 'other deployments are not held up');
});

t.test("a deployment's requests per minute: past them, the next job goes to the next deployment, saying why", async (t) => {
  t.same(await place('acme/metered', 3), ['m-slow', 'm-slow', 'm-spare']);
  const [third] = await query<{ timeline: Array<{ detail?: string }> }>(
    `select timeline from generations where model_id = 'acme/metered' order by created_at desc limit 1`,
    [],
  );
  const timeline = typeof third!.timeline === 'string' ? JSON.parse(third!.timeline) : third!.timeline;
  t.ok(
    timeline.some((e: { detail?: string }) => e.detail === 'attempt on m-slow failed: provider_rate_limited: its requests per minute are used; trying m-spare'),
    'in its timeline',
  );
});

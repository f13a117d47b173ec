import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from '../generations/flow.ts';
import { png, startReplicateFake, TOKEN, VERSION } from '../fakes/replicate.ts';

/**
 * Routing across a model's deployments against the Replicate fake made to fail on purpose, with the local
 * provider as the second deployment: a failure another deployment could fix moves the job (each attempt in its
 * timeline, one charge); one that says the input is at fault does not; nor does a job move to a deployment that
 * drops a parameter it uses, nor past its budget.
 */
const fake = await startReplicateFake({ token: TOKEN });
t.teardown(() => fake.close());
fake.scenario(`version:${VERSION}`, { end: { status: 'succeeded', output: fake.file('out.png', png(16, 16)) } });
// The deployment whose upstream is killed mid-run: its predictions stay processing until then.
const HELD = 'b'.repeat(64);
fake.scenario(`version:${HELD}`, { advance: 'manual', end: { status: 'succeeded', output: fake.file('held.png', png(16, 16)) } });

const dir = mkdtempSync(path.join(tmpdir(), 'gs-routing-'));
const file = path.join(dir, 'catalog.json');
const model = (id: string, routing: Record<string, unknown>, second: Record<string, unknown> = {}) => ({
  id,
  name: id,
  mode: 'text_to_image',
  maker: 'acme',
  description: 'Two deployments.',
  price: { per: 'image', credits: 5 },
  plans: ['free'],
  parameters: { prompt: { required: true }, seed: {} },
  sample: { prompt: 'x', note: 'n' },
  routing,
  deployments: [
    {
      id: `${id.replace('/', '-')}-replicate`,
      provider: 'replicate',
      target: { version: VERSION },
      ...(id === 'acme/guarded' ? { breaker: { minCalls: 2, cooldownMs: 60_000 } } : {}),
    },
    { id: `${id.replace('/', '-')}-local`, provider: 'local', ...second },
  ],
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
        monthlyCredits: 100,
        centsPerCredit: 5,
        concurrentJobs: 4,
        storageBytes: 1e9,
        maxFileBytes: 1e7,
        requestsPerMinute: 6000,
      },
    ],
    models: [
      model('acme/both', {}),
      model('acme/seedless-second', {}, { capabilities: { parameters: ['prompt'] } }),
      model('acme/one-try', { maxAttempts: 1 }),
      model('acme/guarded', {}, {}),
      {
        ...model('acme/killed', {}),
        deployments: [
          { id: 'killed-replicate', provider: 'replicate', target: { version: HELD } },
          { id: 'killed-local', provider: 'local' },
        ],
      },
      {
        id: 'acme/solo',
        name: 'solo',
        mode: 'text_to_image',
        maker: 'acme',
        description: 'One deployment.',
        price: { per: 'image', credits: 5 },
        plans: ['free'],
        parameters: { prompt: { required: true } },
        sample: { prompt: 'x', note: 'n' },
        deployments: [
          {
            id: 'solo-replicate',
            provider: 'replicate',
            target: { version: VERSION },
            upstreamCostCents: 3,
            breaker: { minCalls: 2, failureRatio: 0.5, cooldownMs: 400 },
          },
        ],
      },
    ],
  }),
);

const server = await startTestServer(t, {
  env: {
    CATALOG_FILE: file,
    ALLOW_PRIVATE_EGRESS: 'true',
    LOCAL_PROVIDER_LATENCY_MS: '0',
    REPLICATE_API_TOKEN: TOKEN,
    REPLICATE_BASE_URL: fake.baseUrl,
    PROVIDER_POLL_MS: '20',
    PROVIDER_JOB_TIMEOUT_MS: '4000',
    PROVIDER_REQUEST_TIMEOUT_MS: '1000',
  },
});
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
const run = async (modelId: string, params: Record<string, unknown>) => {
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: modelId, params });
  t.equal(created.status, 201, JSON.stringify(created.body));
  return waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
};

t.test('a retriable failure moves the job to the next deployment, in its timeline, charged once', async (t) => {
  for (const [behaviour, code] of [
    [{ status: 503 }, 'provider_unavailable'],
    [{ status: 429, retryAfter: '60' }, 'provider_rate_limited'],
    [{ status: 500 }, 'provider_error'],
  ] as const) {
    fake.misbehave('create', behaviour);
    const done = await run('acme/both', { prompt: `fails with ${behaviour.status}` });
    t.equal(done.status, 'succeeded', `${behaviour.status}: ${done.errorCode} ${done.errorMessage}`);
    const notes = done.timeline.filter((e) => e.detail?.startsWith('attempt on'));
    t.equal(notes.length, 1, `one failed attempt in the timeline: ${JSON.stringify(done.timeline)}`);
    t.match(notes[0]!.detail, new RegExp(`^attempt on acme-both-replicate failed: ${code}: .*; trying acme-both-local$`));
    t.equal(done.outputAssetIds.length, 1, 'made by the local deployment');
  }
});

t.test('no fallback on an input the provider refused, nor to a deployment that drops a parameter, nor past the budget', async (t) => {
  fake.misbehave('create', { status: 422, body: JSON.stringify({ title: 'Input validation failed', detail: 'prompt: too long', status: 422 }) });
  const refused = await run('acme/both', { prompt: 'refused input' });
  t.equal(refused.status, 'failed');
  t.equal(refused.errorCode, 'provider_input_rejected', "the input's fault is the job's answer");
  t.notOk(
    refused.timeline.some((e) => e.detail?.startsWith('attempt on')),
    'no other attempt',
  );

  fake.misbehave('create', { status: 503 });
  const seeded = await run('acme/seedless-second', { prompt: 'uses a seed', seed: 7 });
  t.equal(seeded.status, 'failed', 'the second deployment does not honour seed: no silent drop');
  t.equal(seeded.errorCode, 'provider_unavailable', 'the last failure');
  fake.misbehave('create', { status: 503 });
  const unseeded = await run('acme/seedless-second', { prompt: 'no seed' });
  t.equal(unseeded.status, 'succeeded', 'without the seed, the second one serves it');

  fake.misbehave('create', { status: 503 });
  const once = await run('acme/one-try', { prompt: 'one try only' });
  t.equal(once.status, 'failed', 'maxAttempts 1: no fallback');
  t.equal(once.errorCode, 'provider_unavailable');
});

t.test('an open breaker sends jobs on without calling the deployment; with every deployment open, a job waits and runs once one closes', async (t) => {
  for (let i = 0; i < 2; i++) {
    fake.misbehave('create', { status: 503 });
    t.equal((await run('acme/guarded', { prompt: `opens the breaker ${i}` })).status, 'succeeded', 'fell back');
  }
  const calls = fake.counts.create;
  const passed = await run('acme/guarded', { prompt: 'breaker open' });
  t.equal(passed.status, 'succeeded');
  t.equal(fake.counts.create, calls, 'the open deployment was not called');
  t.match(
    passed.timeline.find((e) => e.detail?.startsWith('attempt on'))?.detail,
    /^attempt on acme-guarded-replicate failed: provider_unavailable: its circuit breaker is open; trying acme-guarded-local$/,
  );
  const breakers = await server.json('/v1/breakers', { headers: { authorization: `Bearer ${key}` } });
  t.match(
    breakers.body.breakers.find((b: { deploymentId: string }) => b.deploymentId === 'acme-guarded-replicate'),
    { state: 'open' },
    'the operator sees it open',
  );

  for (let i = 0; i < 2; i++) {
    fake.misbehave('create', { status: 503 });
    t.equal((await run('acme/solo', { prompt: `solo fails ${i}` })).status, 'failed', "one deployment: its failure is the job's");
  }
  const before = fake.counts.create;
  const created = await createGeneration(server, key, user.workspaceId, {
    mode: 'text_to_image',
    model: 'acme/solo',
    params: { prompt: 'waits for the breaker' },
  });
  const early = await waitFor(server, key, user.workspaceId, created.body.id, (g) => g.status !== 'queued', 'out of the queue');
  t.equal(early.status, 'reserved', 'it waits with its slot, not failed');
  t.equal(fake.counts.create, before, 'nothing sent while the breaker is open');
  const done = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  t.equal(done.status, 'succeeded', 'handed over once the cool-down ended (half-open), and its success closed it');
  t.equal(fake.counts.create, before + 1, 'one create');
});

t.test('provider calls are measured by provider and deployment', async (t) => {
  const text = await (await fetch(server.metricsUrl!)).text();
  const count = (labels: Record<string, string>) =>
    text
      .split('\n')
      .filter(
        (line) => line.startsWith('gs_provider_call_duration_count{') && Object.entries(labels).every(([name, value]) => line.includes(`${name}="${value}"`)),
      )
      .map((line) => Number(line.split(' ').at(-1)));
  t.ok(
    count({ gs_provider: 'replicate', gs_deployment: 'acme-both-replicate', gs_outcome: 'refused' })[0]! >= 1,
    'the refused creates at one Replicate deployment',
  );
  t.ok(count({ gs_provider: 'replicate', gs_deployment: 'solo-replicate', gs_outcome: 'succeeded' })[0]! >= 1, "another's succeeded job");
  const costs = text.split('\n').filter((line) => line.startsWith('gs_provider_attempt_costs_total{') && line.includes('gs_deployment="solo-replicate"'));
  t.same(
    costs.map((line) => [/gs_outcome="(\w+)"/.exec(line)?.[1], Number(line.split(' ').at(-1))]),
    [['succeeded', 3]],
    'its one attempt that reached Replicate at its upstream cost (the creates refused by a 503 cost nothing)',
  );
  const local = text.split('\n').filter((line) => line.startsWith('gs_provider_call_duration_count{') && line.includes('gs_provider="local"'));
  t.ok(local.length > 0 && local.every((line) => !line.includes('gs_deployment')), "the local provider's, without a deployment label");
});

t.test("every job charged once, at the model's price, whatever its attempts", async (t) => {
  const query = serverQuery(server);
  const money = await moneyOf(query, user.workspaceId);
  t.same(money.reservations, [], 'nothing left reserved');
  t.equal(money.available, money.ledgerAvailable, 'the balance equals the ledger');
  t.equal(money.available, 100 - 5 * 8, 'eight jobs succeeded at 5 credits so far; the failed ones were released');
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  for (const entries of Object.values(ledger)) t.equal((entries.capture ?? 0) + (entries.release ?? 0), 1, 'settled once');
});

t.test('the upstream killed mid-run: jobs in flight there and new ones end on the other deployment, none lost, none charged twice', async (t) => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await createGeneration(server, key, user.workspaceId, {
      mode: 'text_to_image',
      model: 'acme/killed',
      params: { prompt: `in flight ${i}` },
    });
    t.equal(created.status, 201);
    ids.push(created.body.id);
  }
  for (const id of ids) await waitFor(server, key, user.workspaceId, id, (g) => g.status === 'submitted' || g.status === 'running', 'at the provider');
  const money = await moneyOf(serverQuery(server), user.workspaceId);
  await fake.close();
  const late = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/killed', params: { prompt: 'after the kill' } });
  ids.push(late.body.id);
  for (const id of ids) {
    const done = await waitFor(server, key, user.workspaceId, id, isTerminal, 'a terminal state');
    t.equal(done.status, 'succeeded', `${id}: ${done.errorCode} ${done.errorMessage}`);
    t.match(
      done.timeline.find((e) => e.detail?.startsWith('attempt on'))?.detail,
      /^attempt on killed-replicate failed: provider_(unavailable|timeout|error): .*; trying killed-local$/,
      'the failover in its timeline',
    );
  }
  const after = await moneyOf(serverQuery(server), user.workspaceId);
  t.equal(after.available, money.available - 5, 'the three in flight were already reserved; the late one adds one charge; each captured once');
  t.same(after.reservations, []);
  t.equal(after.available, after.ledgerAvailable, 'the balance equals the ledger');
});

import t from 'tap';
import { Ajv } from 'ajv';
import { ManualClock } from '../../runtime/clock.ts';
import { sharedTestServer, startTestServer } from '../helpers/server.ts';
import { createKey, signUp, uniqueEmail } from '../helpers/identity.ts';
import { authMatrix, generationRow, get, insertGenerations, setPlan } from './support.ts';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
/** The plans of the shipped catalog (catalog/default.yaml), as they were before plans were data. */
const SHIPPED_PLANS = {
  free: { name: 'Free', monthlyPriceCents: 0, monthlyCredits: 100, centsPerCredit: 5, concurrentJobs: 2, storageBytes: 1 * GiB, maxFileBytes: 25 * MiB },
  pro: { name: 'Pro', monthlyPriceCents: 2_900, monthlyCredits: 3_000, centsPerCredit: 4, concurrentJobs: 10, storageBytes: 50 * GiB, maxFileBytes: 200 * MiB },
  team: {
    name: 'Team',
    monthlyPriceCents: 9_900,
    monthlyCredits: 12_000,
    centsPerCredit: 3,
    concurrentJobs: 50,
    storageBytes: 500 * GiB,
    maxFileBytes: 1 * GiB,
  },
};

t.test('GET /v1/models follows the workspace plan: free, then pro', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['generations.read']);
  const offered = server.services.catalog.offered();
  t.ok(offered.length >= 7, 'models for every mode are offered');

  const free = await get(server, `/v1/models?workspaceId=${owner.workspaceId}`, key.key);
  t.equal(free.status, 200);
  t.equal(free.body.workspaceId, owner.workspaceId);
  t.equal(free.body.plan, 'free');
  t.same(
    free.body.data.map((m: { id: string }) => m.id),
    offered.map((m) => m.id),
    'every offered model, in catalog order',
  );
  for (const model of free.body.data) {
    const record = offered.find((m) => m.id === model.id)!;
    t.equal(model.available, record.plans.includes('free'), `${model.id}: available on free iff the catalog says so`);
    t.equal(model.walletCentsPerCredit, SHIPPED_PLANS.free.centsPerCredit);
    t.same(model.pricing, record.price);
    t.same(model.plans, record.plans);
    t.match(model, { name: record.name, mode: record.mode, provider: record.provider, maker: record.maker, description: record.description });
  }
  const byId = (body: any, id: string) => body.data.find((m: { id: string }) => m.id === id);
  t.equal(byId(free.body, 'local/text-mini').available, true);
  t.equal(byId(free.body, 'local/text-pro').available, false, 'a paid model is listed but not available on free');
  t.equal(byId(free.body, 'local/video-restyle').available, false);
  t.equal(byId(free.body, 'local/text-mini').credits, 1, 'per job');
  t.equal(byId(free.body, 'local/image-fast').credits, 4, 'per image, one image by default');
  t.equal(byId(free.body, 'local/video-short').credits, 16, 'per second, the default 2 seconds');
  t.equal(byId(free.body, 'local/voice').credits, 3, 'per second, the default 3 seconds');

  await setPlan(server, owner.workspaceId, 'pro');
  const pro = await get(server, `/v1/models?workspaceId=${owner.workspaceId}`, key.key);
  t.equal(pro.body.plan, 'pro');
  t.equal(byId(pro.body, 'local/text-pro').available, true, 'pro unlocks paid models');
  t.equal(byId(pro.body, 'local/video-short').available, true);
  t.equal(byId(pro.body, 'local/video-restyle').available, false, 'team-only stays unavailable on pro');
  t.ok(pro.body.data.every((m: { walletCentsPerCredit: number }) => m.walletCentsPerCredit === SHIPPED_PLANS.pro.centsPerCredit));

  await setPlan(server, owner.workspaceId, 'team');
  const team = await get(server, `/v1/models?workspaceId=${owner.workspaceId}`, key.key);
  t.ok(
    team.body.data.every((m: { available: boolean }) => m.available),
    'team may use every model',
  );
});

t.test('every parameterSchema is a JSON Schema that accepts the sample and refuses what the spec forbids', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const res = await get(server, `/v1/models?workspaceId=${owner.workspaceId}`, owner.cookie);
  t.equal(res.status, 200, "a member's session names the workspace");
  const ajv = new Ajv({ strict: true, allErrors: true });
  for (const model of res.body.data) {
    const schema = model.parameterSchema;
    t.equal(schema.type, 'object', `${model.id}: an object schema`);
    t.equal(schema.additionalProperties, false, `${model.id}: unknown params refused`);
    t.ok(ajv.validateSchema(schema), `${model.id}: a valid JSON Schema ${JSON.stringify(ajv.errors)}`);
    const validate = ajv.compile(schema);
    const sample = await get(server, '/v1/models/public');
    const prompt = sample.body.data.find((m: { id: string }) => m.id === model.id).sample.prompt;
    t.ok(validate({ prompt }), `${model.id}: its sample prompt is valid params`);
    t.notOk(validate({ prompt, colour: 'red' }), `${model.id}: an unknown param is not`);
    if (schema.properties.temperature) {
      t.same([schema.properties.temperature.minimum, schema.properties.temperature.maximum], [0, 2], `${model.id}: temperature 0 to 2`);
      t.notOk(validate({ prompt, temperature: 2.5 }));
    }
    if (schema.properties.aspectRatio) t.same(schema.properties.aspectRatio.enum, ['1:1', '16:9', '9:16', '4:3', '3:4', '21:9']);
    if (schema.properties.format) t.same(schema.properties.format.enum, ['mp3', 'wav', 'ogg']);
  }
});

t.test('GET /v1/models: who may call it', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const other = await signUp(server, { email: uniqueEmail('other') });
  await authMatrix(t, server, owner, other, { path: '/v1/models', scopes: ['generations.read'] });
  const noWorkspace = await get(server, '/v1/models', owner.cookie);
  t.equal(noWorkspace.status, 400, 'a session must name the workspace');
  const foreign = await get(server, `/v1/models?workspaceId=${other.workspaceId}`, owner.cookie);
  t.equal(foreign.status, 404, 'not a member: 404');
  t.equal(foreign.body.error.code, 'not_found');
});

t.test('public endpoints answer without credentials', async (t) => {
  const server = await startTestServer(t, { env: { RATE_LIMIT_PRO: '1234' } });
  const offered = server.services.catalog.offered();

  const models = await get(server, '/v1/models/public');
  t.equal(models.status, 200);
  t.same(
    models.body.data.map((m: { id: string }) => m.id),
    offered.map((m) => m.id),
  );
  for (const model of models.body.data) {
    t.ok(model.sample.prompt.length > 0, `${model.id} has a sample`);
    t.ok(Number.isInteger(model.credits) && model.credits > 0);
    t.notOk('available' in model, 'no plan-specific field without a workspace');
  }

  const catalog = await get(server, '/v1/catalog/public');
  t.equal(catalog.status, 200);
  t.same(catalog.body.models, models.body.data, 'the same models as the showcase');
  t.same(
    catalog.body.samples.map((s: { modelId: string }) => s.modelId),
    offered.map((m) => m.id),
  );
  const makers = [...new Set(offered.map((m) => m.maker))];
  t.same(
    catalog.body.makers.map((m: { id: string }) => m.id),
    makers,
  );
  for (const maker of catalog.body.makers) {
    t.equal(maker.models, offered.filter((m) => m.maker === maker.id).length, `${maker.id}: its model count`);
    t.same([...maker.modes].sort(), [...new Set(offered.filter((m) => m.maker === maker.id).map((m) => m.mode))].sort());
  }

  const plans = await get(server, '/v1/plans');
  t.equal(plans.status, 200);
  t.same(
    plans.body.data.map((p: { id: string }) => p.id),
    ['free', 'pro', 'team'],
  );
  for (const plan of plans.body.data) {
    const entitlements = SHIPPED_PLANS[plan.id as keyof typeof SHIPPED_PLANS];
    t.match(plan, {
      name: entitlements.name,
      monthlyPriceCents: entitlements.monthlyPriceCents,
      currency: 'usd',
      monthlyCredits: entitlements.monthlyCredits,
      walletCentsPerCredit: entitlements.centsPerCredit,
      concurrentJobs: entitlements.concurrentJobs,
      storageBytes: entitlements.storageBytes,
      maxFileBytes: entitlements.maxFileBytes,
    });
    t.same(
      plan.models,
      offered.filter((m) => m.plans.includes(plan.id)).map((m) => m.id),
      `${plan.id}: the models it may use`,
    );
  }
  t.same(
    plans.body.data.map((p: { requestsPerMinute: number }) => p.requestsPerMinute),
    [60, 1234, 3000],
    'rate limits from configuration',
  );
  t.ok(plans.body.data[0].models.length < plans.body.data[2].models.length, 'team may use more than free');

  const stats = await get(server, '/v1/stats/public');
  t.equal(stats.status, 200);
  t.match(stats.body, { generations: { total: 0, succeeded: 0 }, workspaces: 0, modelsOffered: offered.length, modes: 7 });
});

t.test('public stats are real counts, cached for 10 seconds', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 3, 1));
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server);
  await insertGenerations(server, [generationRow(owner.workspaceId, { status: 'succeeded' }), generationRow(owner.workspaceId, { status: 'failed' })]);

  const first = await get(server, '/v1/stats/public');
  t.match(first.body, { generations: { total: 2, succeeded: 1 }, workspaces: 1, asOf: new Date(clock.now()).toISOString() });
  t.equal(first.headers.get('cache-control'), 'public, max-age=10');

  const second = await signUp(server, { email: uniqueEmail('second') });
  await insertGenerations(server, [
    generationRow(second.workspaceId, { status: 'succeeded' }),
    generationRow(second.workspaceId, { status: 'succeeded' }),
    generationRow(second.workspaceId, { status: 'queued' }),
  ]);
  clock.advance(9_000);
  const cached = await get(server, '/v1/stats/public');
  t.same(cached.body, first.body, 'within 10 s the cached counts are served');

  clock.advance(1_000);
  const fresh = await get(server, '/v1/stats/public');
  t.match(
    fresh.body,
    { generations: { total: 5, succeeded: 3 }, workspaces: 2, asOf: new Date(clock.now()).toISOString() },
    'after 10 s the new rows are counted',
  );

  // Another workspace's rows count too: the stats are platform-wide.
  const [count] = await server.services.db.em().execute<Array<{ n: string | number }>>('select count(*) as n from generations');
  t.equal(Number(count?.n), fresh.body.generations.total);
});

import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { priceText } from '../../dashboard/src/prices.ts';
import { catalogFile, plan, servedVersion, textModel, until } from './support.ts';

/**
 * Where the catalog shows: the plan-aware models list, the public models and showcase, the plans, and the
 * OpenAPI document. Each follows the file the service serves, right after it changes; a model priced per
 * token shows its per-1,000 prices. The dashboard's playground and price table read GET /v1/models.
 */
const writer = (credits: number) => textModel('acme/writer', { per: 'job', credits }, ['basic']);
const chat = textModel('acme/chat', { per: 'tokens', inputPer1k: 0.5, outputPer1k: 1.5 }, ['basic', 'pro']);
const first = { defaultPlan: 'basic', plans: [plan('basic'), plan('pro', { monthlyPriceCents: 900 })], models: [writer(2), chat] };
const poet = textModel('acme/poet', { per: 'tokens', inputPer1k: 0.25, outputPer1k: 2 }, ['pro']);
const second = { defaultPlan: 'basic', plans: [plan('basic'), plan('pro', { monthlyPriceCents: 900 })], models: [writer(4), poet] };

type Priced = { id: string; pricing: Record<string, unknown>; credits: number; available?: boolean };
const summary = (models: Priced[]) => models.map((m) => [m.id, m.pricing, m.credits, ...(m.available === undefined ? [] : [m.available])]);

t.test('the models list, the public catalog and the plans follow the file; token prices show per 1,000 tokens', async (t) => {
  const file = catalogFile(t, first);
  const server = await startTestServer(t, { env: { CATALOG_FILE: file.file, LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.read']);
  const read = async () => ({
    models: await server.json(`/v1/models?workspaceId=${user.workspaceId}`, { headers: { authorization: `Bearer ${key}` } }),
    publicModels: await server.json('/v1/models/public'),
    showcase: await server.json('/v1/catalog/public'),
    plans: await server.json('/v1/plans'),
  });

  const v1 = await servedVersion(server.url);
  let seen = await read();
  // A job with an empty prompt (8 tokens of messages) and the default 64 output tokens reserves 0.004 + 0.096, rounded up: 1.
  t.same(
    summary(seen.models.body.data),
    [
      ['acme/writer', { per: 'job', credits: 2 }, 2, true],
      ['acme/chat', { per: 'tokens', inputPer1k: 0.5, outputPer1k: 1.5 }, 1, true],
    ],
    "GET /v1/models: each model's price, a token-priced one per 1,000 tokens each way",
  );
  t.equal(seen.models.headers.get('etag'), `"${v1}-basic"`);
  t.same(
    summary(seen.publicModels.body.data),
    [
      ['acme/writer', { per: 'job', credits: 2 }, 2],
      ['acme/chat', { per: 'tokens', inputPer1k: 0.5, outputPer1k: 1.5 }, 1],
    ],
    'the public models',
  );
  t.same(
    seen.showcase.body.samples.map((s: { modelId: string }) => s.modelId),
    ['acme/writer', 'acme/chat'],
    "the showcase's samples",
  );
  t.same(
    seen.plans.body.data.map((p: { id: string; models: string[] }) => [p.id, p.models]),
    [
      ['basic', ['acme/writer', 'acme/chat']],
      ['pro', ['acme/chat']],
    ],
    'the plans and their models',
  );

  file.swap(second);
  await until('the new version served', async () => ((await servedVersion(server.url)) !== v1 ? true : undefined));
  const v2 = await servedVersion(server.url);
  seen = await read();
  t.same(
    summary(seen.models.body.data),
    [
      ['acme/writer', { per: 'job', credits: 4 }, 4, true],
      ['acme/poet', { per: 'tokens', inputPer1k: 0.25, outputPer1k: 2 }, 1, false],
    ],
    'the models list follows the file at once: a new price, a model gone, a new one (not on this plan)',
  );
  t.equal(seen.models.headers.get('etag'), `"${v2}-basic"`, 'under a new ETag');
  t.same(
    summary(seen.publicModels.body.data),
    [
      ['acme/writer', { per: 'job', credits: 4 }, 4],
      ['acme/poet', { per: 'tokens', inputPer1k: 0.25, outputPer1k: 2 }, 1],
    ],
    'so do the public models',
  );
  t.same(
    seen.showcase.body.models.map((m: { id: string }) => m.id),
    ['acme/writer', 'acme/poet'],
    'and the showcase',
  );
  t.same(
    seen.plans.body.data.map((p: { id: string; models: string[] }) => [p.id, p.models]),
    [
      ['basic', ['acme/writer']],
      ['pro', ['acme/poet']],
    ],
    'and the plans',
  );
});

t.test("the OpenAPI document's examples name no model and no price: nothing in it goes stale when the catalog changes", async (t) => {
  const file = catalogFile(t, first);
  const server = await startTestServer(t, { env: { CATALOG_FILE: file.file } });
  const document = (await server.json('/v1/openapi.json')).body;
  const examples: unknown[] = [];
  const walk = (value: unknown) => {
    if (Array.isArray(value)) return value.forEach(walk);
    if (!value || typeof value !== 'object') return;
    for (const [name, inner] of Object.entries(value)) {
      if (name === 'example' || name === 'examples') examples.push(inner);
      walk(inner);
    }
  };
  walk(document);
  t.ok(examples.length > 0, `${examples.length} examples in the document`);
  const text = JSON.stringify(examples);
  for (const id of ['acme/writer', 'acme/chat', 'local/', 'openai/']) t.notOk(text.includes(id), `no example names ${id}`);
  t.notOk(/"(credits|inputPer1k|outputPer1k|pricing)"/.test(text), 'no example carries a price');
});

t.test('the dashboard says a price as its unit does', async (t) => {
  t.equal(priceText({ per: 'job', credits: 1 }), '1 credit a job');
  t.equal(priceText({ per: 'image', credits: 4 }), '4 credits an image');
  t.equal(priceText({ per: 'second', credits: 12 }), '12 credits a started second');
  t.equal(
    priceText({ per: 'tokens', inputPer1k: 0.5, outputPer1k: 1.5 }),
    '0.5 per 1,000 input tokens · 1.5 per 1,000 output tokens',
    'a token price per 1,000 tokens each way',
  );
});

import t from 'tap';
import { buildCatalog, ModelCatalog } from '../../domain/catalog/index.ts';
import { priceOrder } from '../../actors/workspace/pricing.ts';
import type { GenerationOrder } from '../../actors/workspace/protocol.ts';
import { plan, textModel } from '../catalog/support.ts';

/**
 * The price and deployment of a create are chosen by the workspace actor next to the reservation
 * (actors/workspace/pricing.ts), from the catalog it serves then: a reload between the request's check and its
 * reservation gives the job the new price, and a model taken away in between is refused, not run.
 */
const OPTIONS = { knownProviders: new Set(['local', 'replicate']), configuredProviders: new Set(['local', 'replicate']) };

function catalogOf(models: Record<string, unknown>[]): ModelCatalog {
  const built = buildCatalog({ defaultPlan: 'basic', plans: [plan('basic'), plan('pro')], models }, OPTIONS);
  if (!built.ok) throw new Error(JSON.stringify(built.problems));
  return new ModelCatalog(built.catalog);
}

const order: GenerationOrder = {
  workspaceId: 'ws_1',
  apiKeyId: 'key_1',
  userId: null,
  mode: 'text_to_text',
  modelId: 'acme/text',
  params: { prompt: 'hi', maxTokens: 64 },
  inputs: {},
  paymentMode: 'wallet',
  project: 'p',
};
const idle = { inFlight: () => 0, random: () => 0.5 };

t.test('priced from the catalog served at the reservation: its price, deployment, terms and plans', async (t) => {
  const catalog = catalogOf([textModel('acme/text', { per: 'job', credits: 7 }, ['pro'])]);
  t.same(priceOrder(order, catalog, idle), {
    ok: true,
    draft: { ...order, provider: 'local', deploymentId: 'acme-text-local', tokenTerms: null, credits: 7, modelPlans: ['pro'] },
  });
  const reloaded = catalogOf([textModel('acme/text', { per: 'job', credits: 9 }, ['basic', 'pro'])]);
  t.match(priceOrder(order, reloaded, idle), { ok: true, draft: { credits: 9, modelPlans: ['basic', 'pro'] } }, 'a reload since the check: its price');
});

t.test('a token-priced model reserves the most the job can cost and keeps its terms', async (t) => {
  const catalog = catalogOf([textModel('acme/text', { per: 'tokens', inputPer1k: 2, outputPer1k: 4 }, ['basic'])]);
  const priced = priceOrder(order, catalog, idle);
  t.ok(priced.ok);
  if (!priced.ok) return;
  t.equal(priced.draft.credits, catalog.price(catalog.get('acme/text')!, order.params));
  t.ok(priced.draft.credits > 0, 'something is reserved');
  t.same(priced.draft.tokenTerms, catalog.tokenTerms(catalog.get('acme/text')!));
  t.not(priced.draft.tokenTerms, null);
});

t.test("the deployment by the model's strategy, reading the jobs in flight", async (t) => {
  const catalog = catalogOf([
    textModel('acme/text', { per: 'job', credits: 1 }, ['basic'], {
      routing: { strategy: 'least-busy' },
      deployments: [
        { id: 'first', provider: 'local' },
        { id: 'second', provider: 'replicate', target: { model: 'acme/text' } },
      ],
    }),
  ]);
  const busyFirst = { inFlight: (id: string) => (id === 'first' ? 3 : 1), random: () => 0.5 };
  t.match(priceOrder(order, catalog, busyFirst), { ok: true, draft: { deploymentId: 'second', provider: 'replicate' } });
  const busySecond = { inFlight: (id: string) => (id === 'second' ? 3 : 1), random: () => 0.5 };
  t.match(priceOrder(order, catalog, busySecond), { ok: true, draft: { deploymentId: 'first', provider: 'local' } });
});

t.test('a model a reload took away, or whose mode it changed, is refused', async (t) => {
  const other = catalogOf([textModel('acme/other', { per: 'job', credits: 1 }, ['basic'])]);
  t.same(priceOrder(order, other, idle), { ok: false, message: 'model: unknown model "acme/text"; see GET /v1/models' });
  const changed = catalogOf([{ ...textModel('acme/text', { per: 'job', credits: 1 }, ['basic']), mode: 'text_to_image' }]);
  t.match(priceOrder(order, changed, idle), { ok: false, message: /^mode: model acme\/text makes text_to_image, not text_to_text$/ });
});

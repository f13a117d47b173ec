import t from 'tap';
import { chooseDeployment, isRetriable, serves, withinBudget, type Choice } from '../../domain/catalog/routing.ts';
import type { DeploymentRecord, ModelRecord } from '../../domain/catalog/index.ts';
import { triedDeployments } from '../../actors/generation/actor.ts';

const deployment = (id: string, overrides: Partial<DeploymentRecord> = {}): DeploymentRecord => ({
  id,
  modelId: 'm',
  provider: 'replicate',
  target: {},
  input: undefined,
  limits: {},
  available: true,
  weight: 1,
  breaker: {},
  capabilities: {},
  ...overrides,
});
const model = (deployments: DeploymentRecord[], strategy: ModelRecord['routing']['strategy'] = 'order'): ModelRecord => ({
  id: 'm',
  name: 'M',
  mode: 'image_to_image',
  maker: 'x',
  description: '',
  price: { per: 'job', credits: 1 },
  plans: ['free'],
  parameterSchema: {} as never,
  sample: { prompt: '', note: '' },
  deployments,
  provider: 'replicate',
  routing: { strategy, maxAttempts: 3, budgetMs: 60_000 },
});
const open: Choice = { allows: () => true, inFlight: () => 0, random: () => 0 };
const needs = { parameters: ['prompt', 'strength'], inputs: ['image' as const] };

t.test('only failures another deployment could fix move a job', async (t) => {
  for (const code of ['provider_rate_limited', 'provider_unavailable', 'provider_timeout', 'provider_error', 'provider_bad_response', 'provider_auth_failed'])
    t.ok(isRetriable(code), code);
  for (const code of [
    'provider_input_rejected',
    'provider_content_policy',
    'invalid_input',
    'storage_limit_reached',
    'provider_output_fetch_failed',
    'provider_cancelled',
  ])
    t.notOk(isRetriable(code), code);
});

t.test('a deployment serves a job only if it honours every parameter and input kind the job uses', async (t) => {
  t.ok(serves(deployment('a'), needs), 'saying nothing: honours all');
  t.notOk(serves(deployment('b', { capabilities: { parameters: ['prompt'] } }), needs), 'drops strength: refused');
  t.notOk(serves(deployment('c', { capabilities: { inputs: ['video'] } }), needs), 'drops the input image: refused');
  t.ok(serves(deployment('d', { capabilities: { parameters: ['prompt', 'strength', 'seed'], inputs: ['image', 'mask'] } }), needs));
});

t.test('the strategies choose among deployments that are available, untried, serving and allowed', async (t) => {
  const ds = [deployment('a'), deployment('b', { weight: 3 }), deployment('c', { available: false }), deployment('d', { capabilities: { inputs: [] } })];
  t.equal(chooseDeployment(model(ds), needs, new Set(), open)?.id, 'a', 'order: the first');
  t.equal(chooseDeployment(model(ds), needs, new Set(['a']), open)?.id, 'b', 'order: the first not tried');
  t.equal(chooseDeployment(model(ds), needs, new Set(), { ...open, allows: (id) => id !== 'a' })?.id, 'b', 'an open breaker is skipped');
  t.equal(chooseDeployment(model(ds), needs, new Set(['a', 'b']), open), undefined, 'not c (unavailable) nor d (drops the image)');
  const weighted = model(ds, 'weighted');
  t.equal(chooseDeployment(weighted, needs, new Set(), { ...open, random: () => 0.2 })?.id, 'a', 'weights 1:3, a draw in the first quarter');
  t.equal(chooseDeployment(weighted, needs, new Set(), { ...open, random: () => 0.3 })?.id, 'b');
  const counts = { a: 0, b: 0 };
  for (let i = 0; i < 4000; i++) counts[chooseDeployment(weighted, needs, new Set(), { ...open, random: () => (i + 0.5) / 4000 })!.id as 'a' | 'b']++;
  t.same(counts, { a: 1000, b: 3000 }, 'draws spread evenly land 1:3');
  const busy = model(ds, 'least-busy');
  t.equal(chooseDeployment(busy, needs, new Set(), { ...open, inFlight: (id) => (id === 'a' ? 5 : 2) })?.id, 'b', 'the one with fewer in flight');
  t.equal(chooseDeployment(busy, needs, new Set(), { ...open, inFlight: () => 1 })?.id, 'a', 'ties by order');
});

t.test('the budget: attempts and time', async (t) => {
  const routing = { strategy: 'order' as const, maxAttempts: 3, budgetMs: 60_000 };
  t.ok(withinBudget(routing, 2, 59_999));
  t.notOk(withinBudget(routing, 3, 0), 'attempts used');
  t.notOk(withinBudget(routing, 1, 60_000), 'time used');
});

t.test('the deployments a job was tried on are read from its timeline', async (t) => {
  const tried = triedDeployments({
    deploymentId: 'c',
    timeline: [
      { status: 'queued', at: '' },
      { status: 'running', at: '', detail: 'attempt on a failed: provider_unavailable: x; trying b' },
      { status: 'running', at: '', detail: 'attempt on b failed: provider_timeout: y; trying c' },
      { status: 'running', at: '', detail: 'queue position 2' },
    ],
  });
  t.same([...tried].sort(), ['a', 'b', 'c']);
});

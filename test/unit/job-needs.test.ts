import t from 'tap';
import { chooseDeployment, jobNeedsOf, serves, type Choice } from '../../domain/catalog/routing.ts';
import type { DeploymentRecord, ModelRecord } from '../../domain/catalog/index.ts';

/**
 * What a job needs of a deployment (docs/routing.md): its parameters, the kinds of its input files and, for a
 * chat request, the capabilities its fields call for; and which deployment the router picks at the edges.
 * The strategies themselves are in routing.test.ts.
 */

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
const model = (deployments: DeploymentRecord[], strategy: ModelRecord['routing']['strategy']): ModelRecord => ({
  id: 'm',
  name: 'M',
  mode: 'text_to_text',
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

t.test('jobNeedsOf: the catalog parameters, the kinds of input files given, and what chat fields need', async (t) => {
  t.same(jobNeedsOf({ prompt: 'a cat', strength: 0.5 }, { imageAssetIds: ['ast_1'], videoUrls: [] }), {
    parameters: ['prompt', 'strength'],
    chat: [],
    inputs: ['image'],
  });
  t.same(jobNeedsOf({}, { imageUrls: ['https://x/a.png'], videoAssetIds: ['ast_2'] }).inputs, ['image', 'video'], 'URLs count as asset ids do');
  t.same(jobNeedsOf({}, { videoUrls: ['https://x/a.mp4'] }).inputs, ['video']);
  t.same(jobNeedsOf({}, { imageAssetIds: [], imageUrls: 'not a list' }).inputs, [], 'an empty list or a non-list is no input');
  t.same(
    jobNeedsOf({ messages: [{ role: 'user', content: 'hi' }], maxTokens: 10, tools: [], responseFormat: { type: 'json_object' }, topP: 1 }, {}),
    { parameters: ['maxTokens'], chat: ['response_format', 'tools'], inputs: [] },
    "a chat request's own fields are not parameters: what they need is chat capabilities",
  );
});

t.test('serves: every input kind and every chat capability the job needs', async (t) => {
  const imageOnly = deployment('d', { capabilities: { inputs: ['image'] } });
  t.ok(serves(imageOnly, { parameters: [], inputs: ['image'] }));
  t.notOk(serves(imageOnly, { parameters: [], inputs: ['image', 'video'] }), 'one kind it does not take is enough to refuse');
  t.ok(serves(deployment('d'), { parameters: ['x'], inputs: ['video'] }), 'a deployment that says nothing takes everything');

  const tools = { parameters: [], inputs: [], chat: ['tools' as const] };
  t.notOk(serves(deployment('d', { provider: 'openai' }), tools), "OpenAI's kind takes messages by default, not tools");
  t.ok(serves(deployment('d', { provider: 'openai', capabilities: { chat: ['messages', 'tools'] } }), tools));
  t.notOk(
    serves(deployment('d', { capabilities: { chat: ['tools'] } }), { parameters: [], inputs: [], chat: ['tools', 'response_format'] }),
    'every capability, not one of them',
  );
  t.ok(serves(deployment('d'), { parameters: [], inputs: [], chat: [] }), 'a chat request that needs nothing more goes anywhere');
});

t.test('chooseDeployment at the edges: nothing left to try, and a weighted draw on a boundary', async (t) => {
  const a = deployment('a', { weight: 1 });
  const b = deployment('b', { weight: 3 });
  for (const strategy of ['order', 'least-busy', 'weighted'] as const) {
    t.equal(chooseDeployment(model([a, b], strategy), { parameters: [], inputs: [] }, new Set(['a', 'b']), open), undefined, `${strategy}: all tried`);
  }
  const weighted = model([a, b], 'weighted');
  const draw = (random: number) => chooseDeployment(weighted, { parameters: [], inputs: [] }, new Set(), { ...open, random: () => random })?.id;
  t.equal(draw(0), 'a');
  t.equal(draw(0.2499), 'a');
  t.equal(draw(0.25), 'b', 'a draw of exactly the first weight falls to the next deployment');
  t.equal(draw(0.9999), 'b');
});

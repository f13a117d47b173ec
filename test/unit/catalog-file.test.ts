import t from 'tap';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { parseCatalog } from '../../runtime/catalog-source.ts';
import { shippedCatalogFile } from '../../runtime/config.ts';
import { upstreamInput, sizeOf } from '../../domain/catalog/input-mapping.ts';
import { PROVIDER_KINDS } from '../helpers/catalog.ts';

const build = (configured: string[] = ['local']) => ({ knownProviders: PROVIDER_KINDS, configuredProviders: new Set(configured) });
const shippedText = readFileSync(shippedCatalogFile(), 'utf8');

/** A small valid catalog as a plain object, to break one thing at a time. */
function small(): any {
  return {
    defaultPlan: 'basic',
    plans: [
      {
        id: 'basic',
        name: 'Basic',
        monthlyPriceCents: 0,
        monthlyCredits: 50,
        centsPerCredit: 5,
        concurrentJobs: 1,
        storageBytes: 1000,
        maxFileBytes: 100,
        requestsPerMinute: 10,
      },
      {
        id: 'plus',
        name: 'Plus',
        monthlyPriceCents: 500,
        monthlyCredits: 500,
        centsPerCredit: 4,
        concurrentJobs: 4,
        storageBytes: 10000,
        maxFileBytes: 1000,
        requestsPerMinute: 100,
      },
    ],
    models: [
      {
        id: 'acme/writer',
        name: 'Writer',
        mode: 'text_to_text',
        maker: 'acme',
        description: 'Writes.',
        price: { per: 'tokens', inputPer1k: 0.5, outputPer1k: 1.5 },
        plans: ['plus'],
        parameters: { prompt: { required: true }, maxTokens: { maximum: 2000, default: 500 } },
        sample: { prompt: 'Hi', note: 'n' },
        deployments: [{ id: 'acme-writer', provider: 'local' }],
      },
      {
        id: 'acme/painter',
        name: 'Painter',
        mode: 'text_to_image',
        maker: 'acme',
        description: 'Paints.',
        price: { per: 'image', credits: 3 },
        plans: ['basic', 'plus'],
        parameters: { prompt: { required: true }, numImages: { maximum: 2 }, aspectRatio: { enum: ['1:1', '16:9'] } },
        sample: { prompt: 'A cat', note: 'n' },
        deployments: [
          {
            id: 'acme-painter',
            provider: 'replicate',
            target: { model: 'acme/painter' },
            upstreamInputs: ['prompt', 'num_outputs', 'width', 'height', 'scheduler'],
            input: { rename: { numImages: 'num_outputs' }, fixed: { scheduler: 'K_EULER' }, aspectRatio: { width: 'width', height: 'height', longSide: 1024 } },
          },
        ],
      },
    ],
  };
}

const problemsOf = (document: unknown, configured = ['local', 'replicate']) => {
  const read = parseCatalog(JSON.stringify(document), 'catalog.json', build(configured));
  return read.ok ? [] : read.problems;
};

t.test("the shipped catalog is today's: eleven models, three plans, local models offered, openai ones when configured", async (t) => {
  const read = parseCatalog(shippedText, 'default.yaml', build());
  t.ok(read.ok, read.ok ? 'valid' : read.problems.join('\n'));
  if (!read.ok) return;
  const catalog = read.catalog;
  t.equal(catalog.all().length, 11);
  t.same(
    catalog.plans().map((p) => p.id),
    ['free', 'pro', 'team'],
  );
  t.equal(catalog.defaultPlan().id, 'free');
  t.same(catalog.plan('team'), {
    id: 'team',
    name: 'Team',
    monthlyPriceCents: 9900,
    monthlyCredits: 12000,
    centsPerCredit: 3,
    concurrentJobs: 50,
    unfinishedJobs: 500,
    storageBytes: 500 * 1024 ** 3,
    maxFileBytes: 1024 ** 3,
    uploadMediaTypes: ['image', 'video', 'audio'],
    requestsPerMinute: 3000,
    fairShareWeight: 1,
  });
  t.equal(catalog.plan('no-such-plan').id, 'free', "an unknown plan gets the default plan's entitlements");
  t.same(
    catalog
      .offered()
      .map((m) => m.id)
      .filter((id) => id.startsWith('openai/')),
    [],
    'openai models hidden while openai is not configured',
  );
  const withOpenAi = parseCatalog(shippedText, 'default.yaml', build(['local', 'openai']));
  t.ok(withOpenAi.ok && withOpenAi.catalog.offered().length === 11, 'all eleven once it is');
  // The parameter schemas are those the models had when they were code.
  t.same(JSON.parse(JSON.stringify(catalog.get('local/video-short')!.parameterSchema)), {
    type: 'object',
    additionalProperties: false,
    required: ['prompt'],
    properties: {
      prompt: { type: 'string', minLength: 1, maxLength: 4000, description: 'What to generate.' },
      negativePrompt: { type: 'string', maxLength: 2000, description: 'What to avoid.' },
      seed: { type: 'integer', minimum: 0, maximum: 2147483647, description: 'Same seed and inputs, same output.' },
      aspectRatio: { type: 'string', enum: ['1:1', '16:9', '9:16', '4:3', '3:4', '21:9'], default: '1:1', description: 'Width to height.' },
      durationSeconds: { type: 'number', exclusiveMinimum: 0, maximum: 10, default: 2, description: 'Length of the output in seconds, at most 10.' },
    },
  });
  t.notOk('required' in catalog.get('local/animate')!.parameterSchema, 'animate takes no required prompt');
  t.equal(catalog.price(catalog.get('local/voice')!, { durationSeconds: 2.5 }), 3, 'per started second');
  t.equal(catalog.price(catalog.get('local/image-hd')!, { numImages: 3 }), 30, 'per image');
  // The same content in JSON is the same version; a change of content is another.
  const json = parseCatalog(JSON.stringify(parse(shippedText)), 'catalog.json', build());
  t.ok(json.ok && json.catalog.version === catalog.version, 'the version is of the content, not the format');
  const changed = parse(shippedText);
  changed.models[0].price.credits = 2;
  const other = parseCatalog(JSON.stringify(changed), 'catalog.json', build());
  t.ok(other.ok && other.catalog.version !== catalog.version, 'a price change is a new version');
});

t.test('a valid small catalog: token prices, per-model limits and defaults, mappings', async (t) => {
  t.same(problemsOf(small()), []);
  const read = parseCatalog(JSON.stringify(small()), 'catalog.json', build(['local', 'replicate']));
  if (!read.ok) return t.fail(read.problems.join('\n'));
  const catalog = read.catalog;
  const writer = catalog.get('acme/writer')!;
  const checked = catalog.checkParams('acme/writer', { prompt: 'hello' });
  t.same(checked, { ok: true, params: { prompt: 'hello', maxTokens: 500 } }, "the model's own default");
  t.match(catalog.checkParams('acme/writer', { prompt: 'x', maxTokens: 2001 }), { ok: false, message: /params\.maxTokens: must be <= 2000/ });
  t.match(catalog.checkParams('acme/painter', { prompt: 'x', aspectRatio: '9:16' }), { ok: false, message: /must be one of "1:1", "16:9"/ });
  // Reserve: prompt bytes + 8 tokens of overhead at 0.5/1k, plus 500 output tokens at 1.5/1k: 0.0065 + 0.75 → 1 credit.
  t.equal(catalog.price(writer, { prompt: 'hello', maxTokens: 500 }), 1);
  t.equal(catalog.price(writer, { prompt: 'x'.repeat(4000), maxTokens: 2000 }), 6, '(4008 × 0.5 + 2000 × 1.5) / 1000 = 5.004, up to 6');
  t.same(catalog.tokenTerms(writer), { inputMicroPer1k: 500_000, outputMicroPer1k: 1_500_000 });
  t.equal(catalog.tokenTerms(catalog.get('acme/painter')!), undefined);
  t.same(catalog.plan('basic').unfinishedJobs, 10, 'ten times its concurrency by default');
  const painter = catalog.deploymentFor(catalog.get('acme/painter')!)!;
  t.same(upstreamInput(painter.input, { prompt: 'a cat', numImages: 2, aspectRatio: '16:9' }), {
    prompt: 'a cat',
    num_outputs: 2,
    width: 1024,
    height: 576,
    scheduler: 'K_EULER',
  });
  t.same(sizeOf('9:16', 1024, 8), { width: 576, height: 1024 });
  t.same(sizeOf('21:9', 1000, 64), { width: 1000, height: 448 });
});

t.test('each kind of bad file gives its own message with its path', async (t) => {
  const cases: Array<[string, (c: any) => void, RegExp]> = [
    [
      'an unknown field',
      (c) => {
        c.models[0].colour = 'blue';
      },
      /^models\[0\]\.colour: unknown field$/,
    ],
    [
      'a duplicate model id',
      (c) => {
        c.models[1].id = 'acme/writer';
      },
      /^models\[1\]\.id: duplicate model id "acme\/writer"$/,
    ],
    [
      'a duplicate plan id',
      (c) => {
        c.plans[1].id = 'basic';
      },
      /^plans\[1\]\.id: duplicate plan id "basic"$/,
    ],
    [
      'a duplicate deployment id',
      (c) => {
        c.models[1].deployments[0].id = 'acme-writer';
      },
      /^models\[1\]\.deployments\[0\]\.id: duplicate deployment id "acme-writer"$/,
    ],
    [
      'a model in no plan',
      (c) => {
        c.models[0].plans = [];
      },
      /^models\[0\]\.plans: model acme\/writer is in no plan/,
    ],
    [
      'a plan that does not exist',
      (c) => {
        c.models[0].plans = ['gold'];
      },
      /^models\[0\]\.plans\[0\]: "gold" is not a plan of this file$/,
    ],
    [
      'an unknown default plan',
      (c) => {
        c.defaultPlan = 'gold';
      },
      /^defaultPlan: "gold" is not a plan of this file$/,
    ],
    [
      'an unknown provider',
      (c) => {
        c.models[0].deployments[0].provider = 'skynet';
      },
      /^models\[0\]\.deployments\[0\]\.provider: unknown provider "skynet"/,
    ],
    [
      'an unconfigured provider',
      (c) => {
        c.models[0].deployments[0].provider = 'fal';
      },
      /^models\[0\]\.deployments\[0\]\.provider: provider "fal" is not configured on this service/,
    ],
    [
      'a mapping onto no upstream input',
      (c) => {
        c.models[1].deployments[0].input.rename.numImages = 'count';
      },
      /^models\[1\]\.deployments\[0\]\.input: maps onto "count", which is not one of the upstream's inputs/,
    ],
    [
      'a mapping of a parameter not offered',
      (c) => {
        c.models[1].deployments[0].input.rename.seed = 'seed';
      },
      /^models\[1\]\.deployments\[0\]\.input\.rename\.seed: renames "seed", which the model does not offer$/,
    ],
    [
      'a price of the wrong unit for the mode',
      (c) => {
        c.models[1].price = { per: 'tokens', inputPer1k: 1, outputPer1k: 1 };
      },
      /^models\[1\]\.price\.per: a text_to_image model cannot be priced per tokens \(use job or image\)$/,
    ],
    [
      'a price of no known shape',
      (c) => {
        c.models[1].price = { per: 'frame', credits: 1 };
      },
      /^models\[1\]\.price: must be \{ per: job \| image \| second, credits \} or \{ per: tokens, inputPer1k, outputPer1k \}$/,
    ],
    [
      'a token price finer than a millionth',
      (c) => {
        c.models[0].price.inputPer1k = 0.0000001;
      },
      /^models\[0\]\.price\.inputPer1k: has more than six decimals/,
    ],
    [
      'a token-priced model without maxTokens',
      (c) => {
        delete c.models[0].parameters.maxTokens;
      },
      /^models\[0\]\.parameters: a model priced per token must offer maxTokens/,
    ],
    [
      'an unknown parameter',
      (c) => {
        c.models[0].parameters.topK = {};
      },
      /^models\[0\]\.parameters\.topK: "topK" is not a standard parameter$/,
    ],
    [
      "a bound past the standard's",
      (c) => {
        c.models[1].parameters.numImages.maximum = 9;
      },
      /^models\[1\]\.parameters\.numImages\.maximum: 9 is outside numImages's bounds \(1 to 4\)$/,
    ],
    [
      'a default outside its bounds',
      (c) => {
        c.models[0].parameters.maxTokens.default = 3000;
      },
      /^models\[0\]\.parameters\.maxTokens\.default: 3000 is not a valid maxTokens$/,
    ],
    [
      'an enum value the standard lacks',
      (c) => {
        c.models[1].parameters.aspectRatio.enum = ['1:1', '2:1'];
      },
      /^models\[1\]\.parameters\.aspectRatio\.enum: "2:1" is not a aspectRatio/,
    ],
    [
      'a missing field',
      (c) => {
        delete c.plans[0].concurrentJobs;
      },
      /^plans\[0\]\.concurrentJobs: is required$/,
    ],
    [
      'a wrong type',
      (c) => {
        c.plans[0].monthlyCredits = 'lots';
      },
      /^plans\[0\]\.monthlyCredits: must be integer$/,
    ],
    [
      'a model with no deployment',
      (c) => {
        c.models[0].deployments = [];
      },
      /^models\[0\]\.deployments: must NOT have fewer than 1 items$/,
    ],
  ];
  for (const [what, spoil, expected] of cases) {
    const document = small();
    spoil(document);
    const problems = problemsOf(document);
    t.ok(
      problems.some((p) => expected.test(p)),
      `${what}: ${problems.join(' | ')}`,
    );
  }
  // Every problem at once, not only the first.
  const many = small();
  many.models[0].plans = [];
  many.models[1].price = { per: 'second', credits: 1 };
  many.plans[1].id = 'basic';
  t.same(
    problemsOf(many),
    [
      'plans[1].id: duplicate plan id "basic"',
      'models[0].plans: model acme/writer is in no plan: name at least one',
      'models[1].plans[1]: "plus" is not a plan of this file',
      'models[1].price.per: a text_to_image model cannot be priced per second (use job or image)',
      'models[1].price.per: priced per second, the model must offer durationSeconds',
    ],
    'every problem at once',
  );
});

t.test('YAML problems name their line; a file that is not YAML or JSON says so', async (t) => {
  const yaml = shippedText.replace('    price: { per: image, credits: 10 }', '    price: { per: image, credits: 10, discount: 2 }');
  const read = parseCatalog(yaml, 'catalog.yaml', build());
  t.notOk(read.ok);
  const line = shippedText.split('\n').findIndex((l) => l.includes('price: { per: image, credits: 10 }')) + 1;
  if (!read.ok) t.match(read.problems[0], new RegExp(`^models\\[3\\]\\.price \\(line ${line}\\): must be`), read.problems.join('\n'));
  const duplicateKey = parseCatalog('defaultPlan: free\ndefaultPlan: pro\n', 'catalog.yaml', build());
  t.match(duplicateKey, { ok: false, problems: [/not valid YAML: Map keys must be unique/] });
  t.match(parseCatalog('{"plans": [', 'catalog.json', build()), { ok: false, problems: [/not valid JSON/] });
});

t.test('a file with problems of every kind reports them all at once: the shape hides nothing else', async (t) => {
  const c = small();
  delete c.models[0].description; // shape: a required field missing
  c.models[1].plans = ['basic', 'gold']; // meaning: a plan the file lacks
  c.defaultPlan = 'free'; // meaning: a default plan the file lacks
  c.plans[1].maxFileBytes = 1e9; // meaning: above storageBytes
  const problems = problemsOf(c);
  t.match(problems, [
    /^models\[0\]\.description: is required$/,
    /^plans\[1\]\.maxFileBytes: is above storageBytes/,
    /^defaultPlan: "free" is not a plan of this file$/,
    /^models\[1\]\.plans\[1\]: "gold" is not a plan of this file$/,
  ]);
  t.equal(problems.length, 4, problems.join('\n'));
  // A plan whose own shape is wrong is reported once: the models naming it are not refused for it as well.
  const d = small();
  d.plans[1].colour = 'red';
  t.same(problemsOf(d), ['plans[1].colour: unknown field'], 'a broken plan still names its id');
});

t.test("a deployment target's files are read from the catalog file's folder", async (t) => {
  const seen: Array<Record<string, unknown>> = [];
  const c = small();
  c.models[1].deployments[0].target = { model: 'acme/painter', workflowFile: 'workflows/paint.json', otherFile: '/abs/x.json', name: 'not/a/file' };
  const read = parseCatalog(JSON.stringify(c), '/etc/generation-service/catalog.json', {
    ...build(['local', 'replicate']),
    targetProblems: (_provider: string, target: Record<string, unknown>) => {
      seen.push(target);
      return [];
    },
  });
  t.ok(read.ok, read.ok ? '' : read.problems.join('\n'));
  t.same(
    seen.at(-1),
    { model: 'acme/painter', workflowFile: '/etc/generation-service/workflows/paint.json', otherFile: '/abs/x.json', name: 'not/a/file' },
    'relative *File fields resolved from /etc/generation-service; absolute ones and other fields as written',
  );
  if (read.ok) t.equal(read.catalog.deployment('acme-painter')?.target.workflowFile, '/etc/generation-service/workflows/paint.json', 'as the adapter gets it');
});

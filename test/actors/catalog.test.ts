import t from 'tap';
import { MODES } from '../../domain/catalog/index.ts';
import { shippedCatalog } from '../helpers/catalog.ts';

const catalog = shippedCatalog(['local', 'openai']);
const MODELS = catalog.all();

t.test('the catalog covers all seven modes and every model is well formed', async (t) => {
  t.same([...new Set(MODELS.map((m) => m.mode))].sort(), [...MODES].sort());
  for (const model of MODELS) {
    t.ok(model.plans.length > 0, `${model.id} is offered on some plan`);
    t.ok(model.price.per !== 'tokens' && model.price.credits > 0 && Number.isInteger(model.price.credits), `${model.id} has an integer price`);
    t.equal((model.parameterSchema as { additionalProperties?: boolean }).additionalProperties, false, `${model.id} refuses unknown params`);
  }
});

t.test('params are validated against the model schema with the field named', async (t) => {
  const ok = catalog.checkParams('local/text-mini', { prompt: 'hi', temperature: 2 });
  t.ok(ok.ok);
  if (ok.ok) t.same(ok.params, { prompt: 'hi', temperature: 2, maxTokens: 256 }, 'defaults are filled in');
  const cases: Array<[string, unknown, RegExp]> = [
    ['local/text-mini', { prompt: 'hi', temperature: 2.5 }, /params\.temperature: must be <= 2/],
    ['local/text-mini', { prompt: 'hi', temperature: -0.1 }, /params\.temperature: must be >= 0/],
    ['local/text-mini', {}, /params\.prompt: is required/],
    ['local/text-mini', { prompt: 'hi', aspectRatio: '1:1' }, /unknown parameter "aspectRatio"/],
    ['local/image-fast', { prompt: 'x', aspectRatio: '2:1' }, /params\.aspectRatio: must be one of "1:1", "16:9", "9:16", "4:3", "3:4", "21:9"/],
    ['local/image-fast', { prompt: 'x', numImages: 5 }, /params\.numImages: must be <= 4/],
    ['local/voice', { prompt: 'x', format: 'flac' }, /params\.format: must be one of "mp3", "wav", "ogg"/],
    ['local/video-short', { prompt: 'x', durationSeconds: 11 }, /params\.durationSeconds: must be <= 10/],
    ['local/text-mini', { prompt: 7 }, /params\.prompt: must be string/],
    ['nope/model', { prompt: 'x' }, /unknown model/],
  ];
  for (const [model, params, message] of cases) {
    const result = catalog.checkParams(model, params);
    t.notOk(result.ok, `${model} ${JSON.stringify(params)} refused`);
    if (!result.ok) t.match(result.message, message);
  }
  for (const ratio of ['1:1', '16:9', '9:16', '4:3', '3:4', '21:9']) {
    t.ok(catalog.checkParams('local/image-fast', { prompt: 'x', aspectRatio: ratio }).ok, `aspect ratio ${ratio}`);
  }
  const original = { prompt: 'x' };
  catalog.checkParams('local/image-fast', original);
  t.same(original, { prompt: 'x' }, "the caller's object is not modified");
});

t.test('price is per job, per image or per started second', async (t) => {
  t.equal(catalog.price(catalog.get('local/text-mini')!, {}), 1);
  t.equal(catalog.price(catalog.get('local/image-fast')!, { numImages: 3 }), 12);
  t.equal(catalog.price(catalog.get('local/video-short')!, { durationSeconds: 2.5 }), 24);
  t.ok(catalog.isAllowed(catalog.get('local/text-mini')!, 'free'));
  t.notOk(catalog.isAllowed(catalog.get('local/video-restyle')!, 'pro'));
});

import t from 'tap';
import { buildCatalog, ModelCatalog } from '../../domain/catalog/index.ts';
import { compiledSchemaCount } from '../../domain/catalog/params-validator.ts';
import { plan, textModel } from './support.ts';

/**
 * Params validators are compiled once per distinct schema: a large catalog of models sharing their
 * parameters, built again and again as reloads do, compiles nothing new, and each model still checks its own
 * bounds and fills its own defaults.
 */
const OPTIONS = { knownProviders: new Set(['local']), configuredProviders: new Set(['local']) };

function catalogOf(size: number, price = 1): ModelCatalog {
  const models = Array.from({ length: size }, (_, i) => textModel(`acme/text-${i}`, { per: 'job', credits: price }, ['basic']));
  // One model with bounds of its own.
  models.push(
    textModel('acme/short', { per: 'job', credits: price }, ['basic'], { parameters: { prompt: { required: true }, maxTokens: { maximum: 16, default: 8 } } }),
  );
  const built = buildCatalog({ defaultPlan: 'basic', plans: [plan('basic')], models }, OPTIONS);
  if (!built.ok) throw new Error(JSON.stringify(built.problems));
  return new ModelCatalog(built.catalog);
}

t.test('a reloaded catalog of 500 models sharing a schema compiles no validator again', async (t) => {
  const before = compiledSchemaCount();
  const first = catalogOf(500);
  const afterFirst = compiledSchemaCount();
  t.ok(afterFirst - before <= 2, `the first build compiled ${afterFirst - before} schemas for 501 models`);
  const again = catalogOf(500, 3);
  t.not(again.version, first.version, 'a new version (a new price)');
  t.equal(compiledSchemaCount(), afterFirst, 'built again: nothing compiled');
});

t.test('models sharing a validator still check their own bounds and fill their own defaults', async (t) => {
  const catalog = catalogOf(3);
  t.same(catalog.checkParams('acme/text-0', { prompt: 'hi' }), { ok: true, params: { prompt: 'hi', maxTokens: 64 } });
  t.same(catalog.checkParams('acme/short', { prompt: 'hi' }), { ok: true, params: { prompt: 'hi', maxTokens: 8 } });
  t.match(catalog.checkParams('acme/short', { prompt: 'hi', maxTokens: 100 }), { ok: false, message: /params\.maxTokens: must be <= 16/ });
  t.same(catalog.checkParams('acme/text-1', { prompt: 'hi', maxTokens: 100 }).ok, true, 'the shared schema allows what the other refuses');
  t.match(
    catalog.checkParams('acme/text-2', { prompt: 'hi', colour: 'red' }),
    { ok: false, message: /unknown parameter "colour" for model acme\/text-2/ },
    'the message names the model asked for',
  );
});

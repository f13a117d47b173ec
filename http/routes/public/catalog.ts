import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import type { ModelCatalog } from '../../../domain/catalog/index.ts';
import { once, PublicModelOut, Sample, toPublicModelOut } from '../models/shape.ts';
import { GenerationMode } from '../generations/shape.ts';

const MAKER_NAMES: Record<string, string> = {
  local: 'Built in (runs inside the service)',
  'openai-compatible': 'OpenAI-compatible server',
};

export const Maker = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    models: Type.Integer({ minimum: 1, description: 'Models of this maker in the catalog.' }),
    modes: Type.Array(GenerationMode, { description: 'Modes its models cover.' }),
  },
  { additionalProperties: false },
);

export const PublicCatalogOut = Type.Object(
  {
    models: Type.Array(PublicModelOut),
    samples: Type.Array(Sample, { description: 'A sample prompt per model, to try it.' }),
    makers: Type.Array(Maker),
  },
  { additionalProperties: false },
);

function buildCatalog(catalog: ModelCatalog) {
  const offered = catalog.offered();
  const makers = new Map<string, { models: number; modes: Set<(typeof offered)[number]['mode']> }>();
  for (const model of offered) {
    const maker = makers.get(model.maker) ?? { models: 0, modes: new Set() };
    maker.models++;
    maker.modes.add(model.mode);
    makers.set(model.maker, maker);
  }
  return {
    models: offered.map((model) => toPublicModelOut(catalog, model)),
    samples: offered.map((model) => ({ modelId: model.id, mode: model.mode, prompt: model.sample.prompt, note: model.sample.note })),
    makers: [...makers].map(([id, maker]) => ({ id, name: MAKER_NAMES[id] ?? id, models: maker.models, modes: [...maker.modes] })),
  };
}

export const getPublicCatalog = defineRoute({
  method: 'GET',
  path: '/v1/catalog/public',
  operationId: 'getPublicCatalog',
  summary: 'Public catalog: models, sample prompts and makers (no authentication)',
  description: 'The public catalog: models, sample prompts and model makers, for a landing page. Needs no credentials.',
  tags: ['public'],
  access: 'public',
  responses: { 200: PublicCatalogOut },
  handler: ({ services }) => ({
    headers: { 'Cache-Control': 'public, max-age=60' },
    body: once(services.catalog, 'public-catalog', () => buildCatalog(services.catalog)),
  }),
});

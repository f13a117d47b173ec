import { Type, type Static } from '@sinclair/typebox';
import type { ModelCatalog, ModelRecord } from '../../../domain/catalog/index.ts';
import { GenerationMode } from '../generations/shape.ts';

/** Response shapes of the model catalog (plan-aware and public), with their mappers from catalog records. */

const PlanName = Type.String({ description: 'A plan id of the catalog (free, pro and team in the shipped one).' });

export const Pricing = Type.Union(
  [
    Type.Object(
      {
        credits: Type.Integer({ minimum: 0, description: 'Credits per unit.' }),
        per: Type.Unsafe<'job' | 'image' | 'second'>({
          type: 'string',
          enum: ['job', 'image', 'second'],
          description: 'The unit: a job, each image, or each started second of output.',
        }),
      },
      { additionalProperties: false },
    ),
    Type.Object(
      {
        per: Type.Literal('tokens', {
          description: 'Per 1,000 tokens: the most a job can cost is reserved at creation, what its provider reports is charged when it ends.',
        }),
        inputPer1k: Type.Number({ minimum: 0, description: 'Credits per 1,000 input tokens.' }),
        outputPer1k: Type.Number({ minimum: 0, description: 'Credits per 1,000 output tokens.' }),
      },
      { additionalProperties: false },
    ),
  ],
  { description: 'The price and its unit (docs/money.md).' },
);

const modelFields = {
  id: Type.String({ description: 'Pass as `model` when creating a generation.' }),
  name: Type.String(),
  mode: GenerationMode,
  provider: Type.String({ description: 'The provider that runs it: `local` (built in), `openai`, `replicate`, `cog`, `fal` or `comfyui`.' }),
  maker: Type.String(),
  description: Type.String(),
  pricing: Pricing,
  credits: Type.Integer({
    minimum: 0,
    description:
      'What one job costs with the default params (e.g. one image, the default duration); for a model priced per token, what a job with an empty prompt and the default maxTokens reserves.',
  }),
  plans: Type.Array(PlanName, { description: 'The plans that may use the model.' }),
};

export const ModelOut = Type.Object(
  {
    ...modelFields,
    parameterSchema: Type.Record(Type.String(), Type.Unknown(), { description: 'JSON Schema of `params`; creation validates params against it.' }),
    available: Type.Boolean({ description: "Whether the workspace's plan may use the model (otherwise creation is 422 plan_limit_reached)." }),
    walletCentsPerCredit: Type.Integer({ minimum: 0, description: 'What one credit costs on this plan when paid from the wallet, in US cents.' }),
  },
  { additionalProperties: false },
);
export type ModelOut = Static<typeof ModelOut>;

export const ModelListOut = Type.Object(
  {
    workspaceId: Type.String(),
    plan: PlanName,
    data: Type.Array(ModelOut),
  },
  { additionalProperties: false },
);

export const Sample = Type.Object(
  {
    modelId: Type.String(),
    mode: GenerationMode,
    prompt: Type.String(),
    note: Type.String(),
  },
  { additionalProperties: false },
);

export const PublicModelOut = Type.Object(
  {
    ...modelFields,
    parameterSchema: Type.Record(Type.String(), Type.Unknown(), { description: 'JSON Schema of `params`.' }),
    sample: Type.Object({ prompt: Type.String(), note: Type.String() }, { additionalProperties: false }),
  },
  { additionalProperties: false },
);
export type PublicModelOut = Static<typeof PublicModelOut>;

/** The params a job gets when it names none beyond the required ones: each property's `default`. */
export function defaultParams(model: ModelRecord): Record<string, unknown> {
  const properties = (model.parameterSchema as { properties?: Record<string, { default?: unknown }> }).properties ?? {};
  const params: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(properties)) if (schema.default !== undefined) params[name] = schema.default;
  return params;
}

/** A JSON copy of the schema: TypeBox's symbol keys dropped, nothing shared with the compiled catalog. */
function plainSchema(model: ModelRecord): Record<string, unknown> {
  return JSON.parse(JSON.stringify(model.parameterSchema)) as Record<string, unknown>;
}

function baseOf(catalog: ModelCatalog, model: ModelRecord) {
  return {
    id: model.id,
    name: model.name,
    mode: model.mode,
    provider: model.provider,
    maker: model.maker,
    description: model.description,
    pricing: { ...model.price },
    credits: catalog.price(model, defaultParams(model)),
    plans: [...model.plans],
  };
}

export function toModelOut(catalog: ModelCatalog, model: ModelRecord, plan: string): ModelOut {
  return {
    ...baseOf(catalog, model),
    parameterSchema: plainSchema(model),
    available: catalog.isAllowed(model, plan),
    walletCentsPerCredit: catalog.plan(plan).centsPerCredit,
  };
}

export function toPublicModelOut(catalog: ModelCatalog, model: ModelRecord): PublicModelOut {
  return { ...baseOf(catalog, model), parameterSchema: plainSchema(model), sample: { ...model.sample } };
}

/** A catalog never changes once loaded (a reload makes a new one): each view is built once per catalog (and plan). */
const built = new WeakMap<ModelCatalog, Map<string, unknown>>();

export function once<T>(catalog: ModelCatalog, key: string, build: () => T): T {
  let views = built.get(catalog);
  if (!views) built.set(catalog, (views = new Map()));
  if (!views.has(key)) views.set(key, build());
  return views.get(key) as T;
}

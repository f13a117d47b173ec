import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { CHAT_CAPABILITIES, type ChatCapability } from './chat.ts';
import { MODES } from './modes.ts';

/**
 * The catalog file (CATALOG_FILE, YAML or JSON): plans, models, their prices and their deployments. This is
 * its shape; what a shape cannot say (ids unique, a model's plans known, a price's unit right for its mode,
 * a mapping naming parameters the model offers) is checked by build.ts. docs/catalog.md has an example.
 */

const Id = (description: string) => Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._/:-]*$', description });
const Text = (max: number, description?: string) => Type.String({ maxLength: max, ...(description ? { description } : {}) });
const Count = (description: string) => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });
const Strict = <T extends Record<string, TSchema>>(properties: T, description?: string) =>
  Type.Object(properties, { additionalProperties: false, ...(description ? { description } : {}) });

export const PlanSpec = Strict(
  {
    id: Id('The plan id workspaces are on.'),
    name: Text(100),
    monthlyPriceCents: Count('Subscription price per month, in US cents (0: a plan without a subscription).'),
    monthlyCredits: Count('Credits granted at the start of every period.'),
    centsPerCredit: Count('What one credit costs from the pay-as-you-go wallet, in US cents.'),
    concurrentJobs: Type.Integer({ minimum: 1, maximum: 100_000, description: 'Jobs past queued at one time.' }),
    unfinishedJobs: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 10_000_000, description: 'Jobs not finished (queued or active) at one time; default ten times concurrentJobs.' }),
    ),
    storageBytes: Count('Bytes of assets the workspace may keep.'),
    maxFileBytes: Count('Largest single upload.'),
    uploadMediaTypes: Type.Optional(
      Type.Array(Type.Unsafe<'image' | 'video' | 'audio'>({ type: 'string', enum: ['image', 'video', 'audio'] }), {
        uniqueItems: true,
        description: "What the plan's workspaces may upload (default images only).",
      }),
    ),
    requestsPerMinute: Type.Integer({ minimum: 1, maximum: 10_000_000, description: 'Requests per minute per API key.' }),
    fairShareWeight: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1_000, description: "Share of a busy deployment this plan's workspaces get against others (default 1)." }),
    ),
  },
  'A plan: what it costs and allows.',
);
export type PlanSpec = Static<typeof PlanSpec>;

/** One of our standard parameters as a model offers it: its own bounds and default within the standard's. */
export const ParameterSpec = Strict({
  required: Type.Optional(Type.Boolean()),
  default: Type.Optional(Type.Union([Type.Number(), Type.String(), Type.Boolean()])),
  minimum: Type.Optional(Type.Number()),
  maximum: Type.Optional(Type.Number()),
  maxLength: Type.Optional(Type.Integer({ minimum: 1 })),
  enum: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })),
  description: Type.Optional(Text(500)),
});
export type ParameterSpec = Static<typeof ParameterSpec>;

/** A price, by unit: each job, each image, each started second of output, or per 1,000 tokens in and out. */
export const PriceSpec = Type.Union([
  Strict({ per: Type.Literal('job'), credits: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }) }),
  Strict({ per: Type.Literal('image'), credits: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }) }),
  Strict({ per: Type.Literal('second'), credits: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }) }),
  Strict({
    per: Type.Literal('tokens'),
    inputPer1k: Type.Number({ minimum: 0, maximum: 1_000_000, description: 'Credits per 1,000 input tokens (fractions allowed, to the millionth).' }),
    outputPer1k: Type.Number({ minimum: 0, maximum: 1_000_000, description: 'Credits per 1,000 output tokens.' }),
  }),
]);
export type PriceSpec = Static<typeof PriceSpec>;

/** How our parameters become the upstream's inputs. */
export const InputMappingSpec = Strict({
  rename: Type.Optional(
    Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1, maxLength: 128 }), { description: 'Our parameter → the upstream input it fills.' }),
  ),
  fixed: Type.Optional(
    Type.Record(Type.String({ minLength: 1, maxLength: 128 }), Type.Unknown(), { description: 'Upstream inputs with a value of their own.' }),
  ),
  omit: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'Our parameters the upstream does not get.' })),
  aspectRatio: Type.Optional(
    Strict(
      {
        width: Type.String({ minLength: 1, maxLength: 128 }),
        height: Type.String({ minLength: 1, maxLength: 128 }),
        longSide: Type.Integer({
          minimum: 64,
          maximum: 16_384,
          description: 'Pixels of the longer side; the other follows the ratio, a multiple of `multipleOf`.',
        }),
        multipleOf: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
      },
      'Our aspectRatio as two upstream inputs, width and height.',
    ),
  ),
  images: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'The upstream input that gets the input image(s).' })),
  videos: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'The upstream input that gets the input video.' })),
});
export type InputMappingSpec = Static<typeof InputMappingSpec>;

export const DeploymentSpec = Strict({
  id: Type.String({
    minLength: 1,
    maxLength: 64,
    pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$',
    description: "Unique across the catalog; jobs remember it, and its provider's events come to /v1/providers/{id}/events.",
  }),
  provider: Type.String({ minLength: 1, maxLength: 64, description: 'The adapter: local, openai, replicate, cog, fal, comfyui.' }),
  target: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), { description: 'What the provider runs: its model, version, deployment, app or workflow (per provider).' }),
  ),
  input: Type.Optional(InputMappingSpec),
  upstreamInputs: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
      description: "The upstream's input names; when given, every mapped input must be one of them.",
    }),
  ),
  optional: Type.Optional(Type.Boolean({ description: 'Offered only when its provider is configured (otherwise an unconfigured provider is an error).' })),
  upstreamCostCents: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 100_000_000,
      description: 'What one attempt here costs the operator upstream, in US cents (counted per attempt in a metric).',
    }),
  ),
  weight: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 1_000_000, description: "Its share of the model's jobs under the weighted strategy (default 1)." }),
  ),
  breaker: Type.Optional(
    Strict(
      {
        windowMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
        minCalls: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
        failureRatio: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1 })),
        cooldownMs: Type.Optional(Type.Integer({ minimum: 10, maximum: 86_400_000 })),
        maxCooldownMs: Type.Optional(Type.Integer({ minimum: 10, maximum: 86_400_000 })),
      },
      "Its circuit breaker's settings, each defaulting as docs/routing.md says.",
    ),
  ),
  capabilities: Type.Optional(
    Strict({
      parameters: Type.Optional(
        Type.Array(Type.String({ minLength: 1 }), {
          description: 'The parameters it honours (default: all the model offers); a job using another never falls back to it.',
        }),
      ),
      inputs: Type.Optional(
        Type.Array(Type.Unsafe<'image' | 'video' | 'mask'>({ type: 'string', enum: ['image', 'video', 'mask'] }), {
          description: 'The input files it takes (default: all).',
        }),
      ),
      chat: Type.Optional(
        Type.Array(Type.Unsafe<ChatCapability>({ type: 'string', enum: [...CHAT_CAPABILITIES] }), {
          description:
            'What it takes of a chat request (docs/openai-compatible.md): `messages` as they are (default for provider openai; any other gets them through the prompt template), `response_format`, `tools`.',
        }),
      ),
    }),
  ),
  limits: Type.Optional(
    Strict({
      concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
      requestsPerMinute: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000 })),
      rateLimitAttempts: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: 100,
          description:
            'Calls one request to the provider may take while it answers 429 (backoff with jitter, at least its Retry-After); then the job goes to the next deployment, or fails with provider_rate_limited. Default 6.',
        }),
      ),
      pollMs: Type.Optional(
        Type.Integer({
          minimum: 10,
          maximum: 600_000,
          description: 'How often a job of this deployment is polled (the backstop of its events); default PROVIDER_POLL_MS.',
        }),
      ),
    }),
  ),
});
export type DeploymentSpec = Static<typeof DeploymentSpec>;

export const ModelSpec = Strict({
  id: Id('Pass as `model` when creating a generation.'),
  name: Text(100),
  mode: Type.Unsafe<(typeof MODES)[number]>({ type: 'string', enum: [...MODES] }),
  maker: Text(100),
  description: Text(1000),
  price: PriceSpec,
  plans: Type.Array(Id('A plan id.'), { description: 'The plans that may use the model.' }),
  parameters: Type.Record(Type.String(), ParameterSpec, { description: 'Our standard parameters the model takes, each with its own bounds and default.' }),
  sample: Strict({ prompt: Text(4000), note: Text(500) }),
  deployments: Type.Array(DeploymentSpec, { minItems: 1 }),
  routing: Type.Optional(
    Strict({
      strategy: Type.Optional(
        Type.Unsafe<'order' | 'weighted' | 'least-busy'>({
          type: 'string',
          enum: ['order', 'weighted', 'least-busy'],
          description: "How a job's deployment is chosen (default order).",
        }),
      ),
      maxAttempts: Type.Optional(
        Type.Integer({ minimum: 1, maximum: 20, description: "Attempts a job may have on the model's deployments (default: one per deployment, at most 3)." }),
      ),
      budgetMs: Type.Optional(
        Type.Integer({
          minimum: 1000,
          maximum: 7 * 24 * 3_600_000,
          description: "Time from a job's first hand-over after which no new attempt starts (default 10 minutes).",
        }),
      ),
    }),
  ),
});
export type ModelSpec = Static<typeof ModelSpec>;

export const CatalogSpec = Strict({
  /** The plan new workspaces start on and cancelled subscriptions return to. */
  defaultPlan: Id('The plan new workspaces start on and a cancelled subscription returns to.'),
  plans: Type.Array(PlanSpec, { minItems: 1 }),
  models: Type.Array(ModelSpec),
});
export type CatalogSpec = Static<typeof CatalogSpec>;

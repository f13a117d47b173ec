import { createHash } from 'node:crypto';
import type { ChatCapability } from './chat.ts';
import { Ajv } from 'ajv';
import type { TSchema } from '@sinclair/typebox';
import { CatalogSpec, type DeploymentSpec, type ModelSpec, type PlanSpec } from './file-schema.ts';
import { isParameterName, parameterSchema, paramsSchema } from './params.ts';
import { microOf, type Price } from './pricing.ts';
import { mappedInputNames } from './input-mapping.ts';
import { paramsValidator } from './params-validator.ts';
import type { Mode } from './modes.ts';
import { QUEUE_FACTOR, type PlanEntitlements } from '../plans.ts';

/** One thing wrong with a catalog file: where (a path into the document) and why. */
export interface CatalogProblem {
  path: Array<string | number>;
  message: string;
}

export interface DeploymentRecord {
  id: string;
  modelId: string;
  provider: string;
  target: Record<string, unknown>;
  input: DeploymentSpec['input'];
  limits: { concurrency?: number; requestsPerMinute?: number; rateLimitAttempts?: number; pollMs?: number };
  /** Whether its provider is configured on this service (an optional deployment may not be). */
  available: boolean;
  weight: number;
  /** What one attempt here costs the operator upstream, in US cents (gs.provider.attempt.costs). */
  upstreamCostCents?: number;
  /** Its circuit breaker's own settings (docs/routing.md), over the defaults. */
  breaker: { windowMs?: number; minCalls?: number; failureRatio?: number; cooldownMs?: number; maxCooldownMs?: number };
  /** What it honours; undefined: everything the model offers. */
  capabilities: { parameters?: string[]; inputs?: Array<'image' | 'video' | 'mask'>; chat?: ChatCapability[] };
}

export type RoutingStrategy = 'order' | 'weighted' | 'least-busy';

/** How a model's jobs are spread over its deployments (domain/catalog/routing.ts). */
export interface Routing {
  strategy: RoutingStrategy;
  /** Attempts a job may have on this model's deployments, the first included. */
  maxAttempts: number;
  /** Time from a job's first hand-over after which no new attempt starts. */
  budgetMs: number;
}

export interface ModelRecord {
  id: string;
  name: string;
  mode: Mode;
  maker: string;
  description: string;
  price: Price;
  plans: string[];
  parameterSchema: TSchema;
  sample: { prompt: string; note: string };
  deployments: DeploymentRecord[];
  /** The provider kind of the deployment that runs it. */
  provider: string;
  routing: Routing;
}

export interface BuildOptions {
  /** Provider kinds this service has adapters for. */
  knownProviders: ReadonlySet<string>;
  /** Provider kinds configured (their settings given); a deployment of another kind is an error unless optional. */
  configuredProviders: ReadonlySet<string>;
  /** Per-plan request limits set by environment (RATE_LIMIT_FREE, ...), which win over the file's. */
  requestsPerMinuteOverrides?: Readonly<Record<string, number>>;
  /** The problems of a deployment's `target` for its provider kind (each kind's own schema). */
  targetProblems?: (provider: string, target: Record<string, unknown>) => string[];
}

export interface BuiltCatalog {
  version: string;
  defaultPlan: string;
  plans: PlanEntitlements[];
  models: ModelRecord[];
}

const ajv = new Ajv({ allErrors: true, strict: false });
const validateShape = ajv.compile(CatalogSpec);

/** Which price units a mode may use: tokens for text, images for image modes, seconds for video and audio. */
const UNITS_BY_MODE: Record<Mode, ReadonlyArray<Price['per']>> = {
  text_to_text: ['job', 'tokens'],
  text_to_image: ['job', 'image'],
  image_to_image: ['job', 'image'],
  text_to_video: ['job', 'second'],
  image_to_video: ['job', 'second'],
  video_to_video: ['job', 'second'],
  text_to_audio: ['job', 'second'],
};

/**
 * A catalog document (already parsed from YAML or JSON) checked whole: its shape first, then what a shape
 * cannot say. Every problem is reported, each with its path; a catalog is built only when there are none.
 */
export function buildCatalog(document: unknown, options: BuildOptions): { ok: true; catalog: BuiltCatalog } | { ok: false; problems: CatalogProblem[] } {
  const errors = validateShape(document) ? [] : (validateShape.errors ?? []);
  const shapeProblems = shapeProblemsOf(errors);
  const top = document as Partial<Record<keyof CatalogSpec, unknown>> | null;
  // Without the lists themselves there is nothing more to check; otherwise every plan and model whose own
  // shape is right is checked too, so one run of the file reports its every problem, not the first kind.
  if (shapeProblems.length > 0 && (!top || typeof top !== 'object' || !Array.isArray(top.plans) || !Array.isArray(top.models))) {
    return { ok: false, problems: shapeProblems };
  }
  const broken = (prefix: string) => errors.some((e) => e.instancePath === prefix || e.instancePath.startsWith(`${prefix}/`));
  const spec = document as CatalogSpec;
  const problems: CatalogProblem[] = [];
  const plans: PlanEntitlements[] = [];
  const planIds = new Set<string>();
  spec.plans.forEach((plan, i) => {
    // A plan whose shape is wrong still names its id, so models that name it are not reported as well.
    const id = (plan as Partial<PlanSpec> | null)?.id;
    if (typeof id !== 'string') return;
    if (planIds.has(id)) problems.push({ path: ['plans', i, 'id'], message: `duplicate plan id "${id}"` });
    planIds.add(id);
    if (!broken(`/plans/${i}`)) plans.push(planOf(plan, i, options, problems));
  });
  if (typeof spec.defaultPlan === 'string' && !planIds.has(spec.defaultPlan))
    problems.push({ path: ['defaultPlan'], message: `"${spec.defaultPlan}" is not a plan of this file` });

  const modelIds = new Set<string>();
  const deploymentIds = new Set<string>();
  const models: ModelRecord[] = [];
  spec.models.forEach((model, i) => {
    if (broken(`/models/${i}`)) return;
    if (modelIds.has(model.id)) problems.push({ path: ['models', i, 'id'], message: `duplicate model id "${model.id}"` });
    modelIds.add(model.id);
    const record = modelOf(model, ['models', i], planIds, deploymentIds, options, problems);
    if (record) models.push(record);
  });
  if (shapeProblems.length > 0 || problems.length > 0) return { ok: false, problems: dedupe([...shapeProblems, ...problems]) };
  return { ok: true, catalog: { version: versionOf(document), defaultPlan: spec.defaultPlan, plans, models } };
}

/** The shape's errors as problems, each with its path. */
function shapeProblemsOf(errors: NonNullable<typeof validateShape.errors>): CatalogProblem[] {
  // A union (the price) that matches no branch: one message for it, not one per branch.
  const unions = errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath);
  const inUnion = (path: string) => unions.some((u) => path === u || path.startsWith(`${u}/`));
  const problems = errors
    .filter((e) => e.keyword === 'anyOf' || !inUnion(e.instancePath))
    .map((error): CatalogProblem => {
      const path = error.instancePath
        .split('/')
        .slice(1)
        .map((part) => (/^\d+$/.test(part) ? Number(part) : part.replace(/~1/g, '/').replace(/~0/g, '~')));
      if (error.keyword === 'anyOf') return { path, message: 'must be { per: job | image | second, credits } or { per: tokens, inputPer1k, outputPer1k }' };
      if (error.keyword === 'additionalProperties') {
        return { path: [...path, String((error.params as { additionalProperty: string }).additionalProperty)], message: 'unknown field' };
      }
      if (error.keyword === 'required')
        return { path: [...path, String((error.params as { missingProperty: string }).missingProperty)], message: 'is required' };
      if (error.keyword === 'enum')
        return { path, message: `must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}` };
      return { path, message: error.message ?? 'is not valid' };
    });
  return dedupe(problems);
}

function planOf(plan: PlanSpec, i: number, options: BuildOptions, problems: CatalogProblem[]): PlanEntitlements {
  const unfinishedJobs = plan.unfinishedJobs ?? plan.concurrentJobs * QUEUE_FACTOR;
  if (unfinishedJobs < plan.concurrentJobs)
    problems.push({ path: ['plans', i, 'unfinishedJobs'], message: `must be at least concurrentJobs (${plan.concurrentJobs})` });
  if (plan.maxFileBytes > plan.storageBytes) problems.push({ path: ['plans', i, 'maxFileBytes'], message: `is above storageBytes (${plan.storageBytes})` });
  return {
    id: plan.id,
    name: plan.name,
    monthlyPriceCents: plan.monthlyPriceCents,
    monthlyCredits: plan.monthlyCredits,
    centsPerCredit: plan.centsPerCredit,
    concurrentJobs: plan.concurrentJobs,
    unfinishedJobs,
    storageBytes: plan.storageBytes,
    maxFileBytes: plan.maxFileBytes,
    uploadMediaTypes: plan.uploadMediaTypes ?? ['image'],
    requestsPerMinute: options.requestsPerMinuteOverrides?.[plan.id] ?? plan.requestsPerMinute,
    fairShareWeight: plan.fairShareWeight ?? 1,
  };
}

function modelOf(
  model: ModelSpec,
  at: Array<string | number>,
  planIds: Set<string>,
  deploymentIds: Set<string>,
  options: BuildOptions,
  problems: CatalogProblem[],
): ModelRecord | undefined {
  const before = problems.length;
  const push = (path: Array<string | number>, message: string) => problems.push({ path: [...at, ...path], message });
  if (model.plans.length === 0) push(['plans'], `model ${model.id} is in no plan: name at least one`);
  model.plans.forEach((plan, j) => {
    if (!planIds.has(plan)) push(['plans', j], `"${plan}" is not a plan of this file`);
  });
  if (new Set(model.plans).size !== model.plans.length) push(['plans'], 'names a plan twice');

  if (!UNITS_BY_MODE[model.mode].includes(model.price.per)) {
    push(['price', 'per'], `a ${model.mode} model cannot be priced per ${model.price.per} (use ${UNITS_BY_MODE[model.mode].join(' or ')})`);
  }
  if (model.price.per === 'tokens') {
    for (const key of ['inputPer1k', 'outputPer1k'] as const) {
      if (microOf(model.price[key]) === undefined) push(['price', key], 'has more than six decimals (prices are kept in millionths of a credit)');
    }
  }

  const properties: Record<string, TSchema> = {};
  const required: string[] = [];
  const paramProblems: string[] = [];
  for (const [name, choice] of Object.entries(model.parameters)) {
    if (!isParameterName(name)) {
      push(['parameters', name], `"${name}" is not a standard parameter`);
      continue;
    }
    const before = paramProblems.length;
    properties[name] = parameterSchema(name, choice, paramProblems, name);
    for (const message of paramProblems.splice(before)) {
      const [where, ...rest] = message.split(': ');
      push(['parameters', ...where!.split('.')], rest.join(': '));
    }
    if (choice.required) required.push(name);
  }
  const offered = Object.keys(properties);
  if (model.price.per === 'tokens' && !offered.includes('maxTokens'))
    push(['parameters'], 'a model priced per token must offer maxTokens (its reservation is bounded by it)');
  if (model.price.per === 'second' && !offered.includes('durationSeconds')) push(['price', 'per'], 'priced per second, the model must offer durationSeconds');

  const deployments: DeploymentRecord[] = [];
  model.deployments.forEach((deployment, j) => {
    const where = ['deployments', j];
    if (deploymentIds.has(deployment.id)) push([...where, 'id'], `duplicate deployment id "${deployment.id}"`);
    deploymentIds.add(deployment.id);
    const known = options.knownProviders.has(deployment.provider);
    if (!known) push([...where, 'provider'], `unknown provider "${deployment.provider}" (one of ${[...options.knownProviders].join(', ')})`);
    const configured = options.configuredProviders.has(deployment.provider);
    if (known && !configured && !deployment.optional) {
      push([...where, 'provider'], `provider "${deployment.provider}" is not configured on this service (set its settings, or mark the deployment optional)`);
    }
    if (known) for (const problem of options.targetProblems?.(deployment.provider, deployment.target ?? {}) ?? []) push([...where, 'target'], problem);
    checkMapping(deployment, offered, (path, message) => push([...where, ...path], message));
    deployments.push({
      id: deployment.id,
      modelId: model.id,
      provider: deployment.provider,
      target: deployment.target ?? {},
      input: deployment.input,
      limits: { ...deployment.limits },
      available: known && configured,
      weight: deployment.weight ?? 1,
      ...(deployment.upstreamCostCents !== undefined ? { upstreamCostCents: deployment.upstreamCostCents } : {}),
      breaker: { ...deployment.breaker },
      capabilities: { ...deployment.capabilities },
    });
    for (const name of deployment.capabilities?.parameters ?? []) {
      if (!offered.includes(name)) push([...where, 'capabilities', 'parameters'], `names "${name}", which the model does not offer`);
    }
  });
  if (problems.length > before) return undefined;
  let parameterSchemaOut: TSchema;
  try {
    parameterSchemaOut = paramsSchema(properties, required);
    paramsValidator(parameterSchemaOut);
  } catch (error) {
    push(['parameters'], `do not make a valid schema: ${(error as Error).message}`);
    return undefined;
  }
  const runs = deployments.find((d) => d.available) ?? deployments[0]!;
  return {
    id: model.id,
    name: model.name,
    mode: model.mode,
    maker: model.maker,
    description: model.description,
    price: model.price,
    plans: [...model.plans],
    parameterSchema: parameterSchemaOut,
    sample: { ...model.sample },
    deployments,
    provider: runs.provider,
    routing: {
      strategy: model.routing?.strategy ?? 'order',
      maxAttempts: model.routing?.maxAttempts ?? Math.min(3, deployments.length),
      budgetMs: model.routing?.budgetMs ?? 10 * 60_000,
    },
  };
}

/** A mapping may only speak of parameters the model offers, and (when the deployment lists them) of upstream inputs that exist. */
function checkMapping(deployment: DeploymentSpec, offered: string[], push: (path: Array<string | number>, message: string) => void): void {
  const input = deployment.input;
  for (const name of Object.keys(input?.rename ?? {})) {
    if (!offered.includes(name)) push(['input', 'rename', name], `renames "${name}", which the model does not offer`);
  }
  for (const name of input?.omit ?? []) {
    if (!offered.includes(name)) push(['input', 'omit'], `omits "${name}", which the model does not offer`);
  }
  if (input?.aspectRatio && !offered.includes('aspectRatio')) push(['input', 'aspectRatio'], 'maps aspectRatio, which the model does not offer');
  if (deployment.upstreamInputs) {
    const known = new Set(deployment.upstreamInputs);
    for (const name of mappedInputNames(input, offered)) {
      if (!known.has(name)) push(['input'], `maps onto "${name}", which is not one of the upstream's inputs (${deployment.upstreamInputs.join(', ')})`);
    }
  }
}

/** The catalog's version: a hash of its content (not of its formatting), the same on every node serving the same catalog. */
function versionOf(document: unknown): string {
  return createHash('sha256').update(stableJson(document)).digest('hex').slice(0, 16);
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${stableJson((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

function dedupe(problems: CatalogProblem[]): CatalogProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = `${p.path.join('.')}|${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

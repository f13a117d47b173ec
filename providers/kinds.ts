import type { TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { AdapterContext, ProviderAdapter } from './adapter.ts';
import { parseOpenAiSettings, type OpenAiSettings } from './openai/settings.ts';
import { openaiDeploymentTarget, type OpenAiDeploymentTarget } from './openai/deployment.ts';
import { createOpenAiAdapter } from './openai/adapter.ts';
import { parseReplicateSettings, type ReplicateSettings } from './replicate/settings.ts';
import { replicateDeploymentTarget, type ReplicateDeploymentTarget } from './replicate/deployment.ts';
import { createReplicateAdapter } from './replicate/adapter.ts';
import { parseCogSettings, type CogSettings } from './cog/settings.ts';
import { cogDeploymentTarget, type CogDeploymentTarget } from './cog/deployment.ts';
import { createCogAdapter } from './cog/adapter.ts';
import { parseFalSettings, type FalSettings } from './fal/settings.ts';
import { falDeploymentTarget, type FalDeploymentTarget } from './fal/deployment.ts';
import { createFalAdapter } from './fal/adapter.ts';
import { parseComfyuiSettings, type ComfyuiSettings } from './comfyui/settings.ts';
import { comfyuiDeploymentTarget, type ComfyuiDeploymentTarget } from './comfyui/deployment.ts';
import { createComfyuiAdapter } from './comfyui/adapter.ts';
import { loadWorkflowTemplate } from './comfyui/workflow.ts';

/**
 * The provider kinds a catalog deployment may name, besides the built-in `local`: how each reads its
 * settings from the environment, what a deployment's `target` of it looks like, and how an adapter of one
 * deployment is made. The composition root reads every kind's settings once (a kind is offered only when
 * configured) and makes adapters as the catalog's deployments need them.
 */
interface Kind<S, T> {
  parse(env: Record<string, string | undefined>): { settings: S | undefined; problems: string[] };
  target: TSchema;
  /** Checks beyond the schema (a ComfyUI workflow's placeholders); each problem one line. */
  check?(target: T): string[];
  create(settings: S, deployment: { id: string; target: T }, context: AdapterContext): ProviderAdapter;
  /** The kind's limit of jobs at once, from its settings. */
  limit(settings: S): number | undefined;
}

const kind = <S, T>(k: Kind<S, T>) => k as Kind<unknown, unknown>;

export const ADAPTER_KINDS: Record<string, Kind<unknown, unknown>> = {
  openai: kind<OpenAiSettings, OpenAiDeploymentTarget>({
    parse: parseOpenAiSettings,
    target: openaiDeploymentTarget,
    create: createOpenAiAdapter,
    limit: (s) => s.maxConcurrentJobs,
  }),
  replicate: kind<ReplicateSettings, ReplicateDeploymentTarget>({
    parse: parseReplicateSettings,
    target: replicateDeploymentTarget,
    create: createReplicateAdapter,
    limit: (s) => s.maxConcurrentJobs,
  }),
  cog: kind<CogSettings, CogDeploymentTarget>({
    parse: parseCogSettings,
    target: cogDeploymentTarget,
    create: createCogAdapter,
    limit: (s) => s.maxConcurrentJobs,
  }),
  fal: kind<FalSettings, FalDeploymentTarget>({
    parse: parseFalSettings,
    target: falDeploymentTarget,
    create: createFalAdapter,
    limit: (s) => s.maxConcurrentJobs,
  }),
  comfyui: kind<ComfyuiSettings, ComfyuiDeploymentTarget>({
    parse: parseComfyuiSettings,
    target: comfyuiDeploymentTarget,
    create: createComfyuiAdapter,
    limit: (s) => s.maxConcurrentJobs,
    check: (target) => loadWorkflowTemplate(target).problems,
  }),
};

export interface ConfiguredKinds {
  /** Each configured kind's settings. */
  settings: Map<string, unknown>;
  /** Every problem of every kind's settings, each naming its variable. */
  problems: string[];
}

/** Reads every kind's settings from the environment. */
export function readProviderSettings(env: Record<string, string | undefined>): ConfiguredKinds {
  const settings = new Map<string, unknown>();
  const problems: string[] = [];
  for (const [name, k] of Object.entries(ADAPTER_KINDS)) {
    const read = k.parse(env);
    problems.push(...read.problems);
    if (read.settings !== undefined && read.problems.length === 0) settings.set(name, read.settings);
  }
  return { settings, problems };
}

/** The problems of a deployment's target for its kind (none for a kind without adapter, such as local). */
export function targetProblems(provider: string, target: Record<string, unknown>): string[] {
  const k = ADAPTER_KINDS[provider];
  if (!k) return [];
  const errors = [...Value.Errors(k.target, target)].slice(0, 5).map((e) => `${e.path || '(target)'}: ${e.message}`);
  if (errors.length > 0) return errors;
  return k.check?.(target) ?? [];
}

export function createAdapter(
  provider: string,
  settings: unknown,
  deployment: { id: string; target: Record<string, unknown> },
  context: AdapterContext,
): ProviderAdapter {
  const k = ADAPTER_KINDS[provider];
  if (!k) throw new Error(`no adapter for provider kind ${provider}`);
  return k.create(settings, deployment, context);
}

export function kindLimit(provider: string, settings: unknown): number | undefined {
  return ADAPTER_KINDS[provider]?.limit(settings);
}

import type { DeploymentRecord, ModelRecord, Routing } from './build.ts';
import { chatCapabilitiesOf, chatNeedsOf, isChatParam, type ChatCapability } from './chat.ts';

export type { Routing, RoutingStrategy } from './build.ts';

/**
 * Which deployment of a model runs a job, and whether a failed attempt may move to another (docs/routing.md).
 * Pure: the breakers' word, the deployments' load and the random draw are passed in.
 */
/**
 * Failures another deployment could fix: the provider's state, not the job's input. A refused input or a
 * content-policy refusal is the job's answer, wherever it runs: no fallback.
 */
const RETRIABLE = new Set([
  'provider_rate_limited',
  'provider_unavailable',
  'provider_timeout',
  'provider_error',
  'provider_bad_response',
  'provider_auth_failed',
]);

export function isRetriable(errorCode: string): boolean {
  return RETRIABLE.has(errorCode);
}

/** What a job uses, for the check that a fallback drops nothing. */
export interface JobNeeds {
  /** The parameters it was created with (defaults included). */
  parameters: string[];
  /** Kinds of input files it has. */
  inputs: Array<'image' | 'video' | 'mask'>;
  /** What a chat request needs of its deployment beyond a prompt (domain/catalog/chat.ts). */
  chat?: ChatCapability[];
}

/** What a job uses: the parameters it was created with, and the kinds of its input files (asset ids or URLs). */
export function jobNeedsOf(params: Record<string, unknown>, inputs: Record<string, unknown>): JobNeeds {
  const has = (...names: string[]) => names.some((name) => Array.isArray(inputs[name]) && (inputs[name] as unknown[]).length > 0);
  return {
    // A chat request's own fields are not catalog parameters: what they need is `chat`.
    parameters: Object.keys(params).filter((name) => !isChatParam(name)),
    chat: chatNeedsOf(params),
    inputs: [...(has('imageAssetIds', 'imageUrls') ? ['image' as const] : []), ...(has('videoAssetIds', 'videoUrls') ? ['video' as const] : [])],
  };
}

/** Whether a deployment honours every parameter and input kind the job uses (a deployment that says nothing honours all). */
export function serves(deployment: DeploymentRecord, needs: JobNeeds): boolean {
  const { parameters, inputs } = deployment.capabilities;
  if (parameters && !needs.parameters.every((name) => parameters.includes(name))) return false;
  if (inputs && !needs.inputs.every((kind) => inputs.includes(kind))) return false;
  if (needs.chat && needs.chat.length > 0) {
    const chat = chatCapabilitiesOf(deployment);
    if (!needs.chat.every((capability) => chat.includes(capability))) return false;
  }
  return true;
}

export interface Choice {
  /** Whether the deployment's breaker lets a job through now. */
  allows(deploymentId: string): boolean;
  /** Jobs in flight on the deployment now (least-busy). */
  inFlight(deploymentId: string): number;
  /** A number in [0, 1) (weighted). */
  random(): number;
}

/**
 * The deployment a job goes to: among the model's available deployments that serve it, were not tried yet and
 * whose breaker allows, the first (order), one drawn by weight (weighted), or the one with the fewest jobs in
 * flight (least-busy, ties by order). Undefined when none qualifies.
 */
export function chooseDeployment(model: ModelRecord, needs: JobNeeds, tried: ReadonlySet<string>, choice: Choice): DeploymentRecord | undefined {
  const candidates = model.deployments.filter((d) => d.available && !tried.has(d.id) && serves(d, needs) && choice.allows(d.id));
  if (candidates.length === 0) return undefined;
  switch (model.routing.strategy) {
    case 'order':
      return candidates[0];
    case 'least-busy': {
      let best = candidates[0]!;
      for (const d of candidates) if (choice.inFlight(d.id) < choice.inFlight(best.id)) best = d;
      return best;
    }
    case 'weighted': {
      const total = candidates.reduce((sum, d) => sum + d.weight, 0);
      let draw = choice.random() * total;
      for (const d of candidates) {
        draw -= d.weight;
        if (draw < 0) return d;
      }
      return candidates[candidates.length - 1];
    }
  }
}

/** Whether a job that has had `attempts` attempts, its first `elapsedMs` ago, may have another. */
export function withinBudget(routing: Routing, attempts: number, elapsedMs: number): boolean {
  return attempts < routing.maxAttempts && elapsedMs < routing.budgetMs;
}

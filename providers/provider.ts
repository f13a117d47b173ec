import type { Mode } from '../domain/catalog/models.ts';
import type { InboundEvent, OutputFile, VerifiedEvent } from './adapter.ts';

/** What a provider is asked to make. Inputs are already fetched and checked. */
export interface ProviderJob {
  generationId: string;
  mode: Mode;
  modelId: string;
  params: Record<string, unknown>;
  inputs: { images: Buffer[]; videos: Buffer[] };
  /** The upstream's input, mapped from `params` by the job's deployment (catalog); adapters of free-form inputs send it. */
  input?: Record<string, unknown>;
  /** Epoch milliseconds by which the job must be over at its provider. */
  deadline?: number;
  /** Handed over again after a restart that came before its provider job id was written (providers/adapter.ts). */
  afterRestart?: boolean;
}

export type { OutputFile } from './adapter.ts';

/** What a provider reports about a job it accepted; failures are data, never exceptions. */
export type ProviderUpdate =
  | { type: 'running' }
  /** For the job's timeline (a queue position, the last lines of its logs, a 429 wait); no change of state. */
  | { type: 'progress'; detail: string }
  /** A piece of a streamed text answer, as it arrives (providers/adapter.ts). */
  | { type: 'output'; delta: string }
  /** `usage`: the tokens a text job used, as the provider counted them (a token-priced job is charged by them). */
  | { type: 'succeeded'; textOutput?: string; files: OutputFile[]; usage?: { inputTokens: number; outputTokens: number } }
  | { type: 'failed'; errorCode: string; errorMessage: string; usage?: { inputTokens: number; outputTokens: number } };

/**
 * A provider as the generation actor uses it: `submit` hands a job over and resolves once the provider
 * accepted it; progress and the result come later through `report`, from polling, a socket or an event.
 *
 * After a restart, a failover or a handover, a job whose provider job id was written is followed by `resume`
 * (the provider looked it up) and never submitted again; a provider without `resume` (the local one, whose
 * jobs live in the service's process) has its job handed over again, up to MAX_ATTEMPTS (actors/generation/machine.ts). The
 * workspace is charged once whatever happens. `verifyEvent` checks an inbound event on any node;
 * `deliverEvent` hands it, on the job's node, to the adapter that follows the job.
 */
export interface Provider {
  name: string;
  /** Jobs this provider takes at once, across all workspaces; undefined for no limit. Queued jobs wait while it is full. */
  maxConcurrentJobs?: number;
  /**
   * It answers within the request that hands a job over, and keeps nothing a restart could look up (OpenAI,
   * local): the job's submitted and running need no commit of their own (actors/generation/actor.ts, RIDE_MS).
   */
  answersWithinRequest?: boolean;
  submit(job: ProviderJob, report: (update: ProviderUpdate) => void): Promise<{ providerJobId: string }>;
  resume?(providerJobId: string, job: ProviderJob, report: (update: ProviderUpdate) => void): void;
  cancel(providerJobId: string): void;
  verifyEvent?(event: InboundEvent): VerifiedEvent;
  deliverEvent?(providerJobId: string, payload: unknown, jobId?: string): void;
}

/**
 * The providers of this service: the built-in ones by kind (`local`), and those of the catalog's deployments
 * (an adapter per deployment, made when first needed by `deployments`). A job is run by its deployment's
 * provider when there is one, by its kind's otherwise (jobs created before deployments were data).
 */
export class ProviderRegistry {
  private readonly providers = new Map<string, Provider>();
  private readonly limits = new Map<string, number | undefined>();
  private deployments: ((deploymentId: string) => Provider | undefined) | undefined;
  private readonly busy = new Map<string, number>();

  add(provider: Provider): this {
    this.providers.set(provider.name, provider);
    this.limits.set(provider.name, provider.maxConcurrentJobs);
    return this;
  }

  /** A kind whose providers are made per deployment, with its limit of jobs at once across them. */
  addKind(kind: string, maxConcurrentJobs: number | undefined): this {
    this.limits.set(kind, maxConcurrentJobs);
    return this;
  }

  serveDeployments(resolve: (deploymentId: string) => Provider | undefined): this {
    this.deployments = resolve;
    return this;
  }

  get(name: string): Provider | undefined {
    return this.providers.get(name);
  }

  /** The provider of a deployment (undefined when it is not in the catalog or its kind is not configured). */
  forDeployment(deploymentId: string): Provider | undefined {
    return this.deployments?.(deploymentId);
  }

  /** The provider that runs a job: its deployment's, else its kind's. */
  forJob(job: { provider: string; deploymentId: string | null }): Provider | undefined {
    return (job.deploymentId !== null ? this.forDeployment(job.deploymentId) : undefined) ?? this.providers.get(job.provider);
  }

  has(name: string): boolean {
    return this.limits.has(name);
  }

  /** An attempt was handed to a deployment (this node's count, for least-busy routing). */
  started(deploymentId: string): void {
    this.busy.set(deploymentId, (this.busy.get(deploymentId) ?? 0) + 1);
  }

  /** An attempt on a deployment ended. */
  ended(deploymentId: string): void {
    const left = (this.busy.get(deploymentId) ?? 1) - 1;
    if (left > 0) this.busy.set(deploymentId, left);
    else this.busy.delete(deploymentId);
  }

  /** Attempts in flight on a deployment from this node. */
  inFlight(deploymentId: string): number {
    return this.busy.get(deploymentId) ?? 0;
  }

  /** A kind's limit of jobs at once (capacity is kept per kind). */
  limitOf(kind: string): number | undefined {
    return this.limits.get(kind);
  }
}

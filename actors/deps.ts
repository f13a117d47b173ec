import type { DeploymentRecord, ModelCatalog } from '../domain/catalog/index.ts';
import type { Breakers } from '../providers/routing/breaker-store.ts';
import type { ProviderRegistry } from '../providers/provider.ts';
import type { OutputStore } from './generation/output-store.ts';
import type { InputResolver } from './generation/input-resolver.ts';
import type { PaymentProvider } from './billing/provider.ts';
import type { ProviderCapacity } from './generation/provider-capacity.ts';
import type { HeldJobs } from './generation/held-jobs.ts';
import type { WebhookDeps } from './webhook/deps.ts';
import type { WorkMetrics } from '../runtime/metrics/index.ts';
import type { LiveOutput, PublishedRow } from '../runtime/live-events.ts';

/** What the service hands its actors (ctx.deps): built once in app/service.ts. */
export interface ActorDeps {
  catalog: ModelCatalog;
  providers: ProviderRegistry;
  /** A deployment by id: the catalog's, or one a reload removed (its jobs finish on it). */
  deployment(id: string): DeploymentRecord | undefined;
  /** A job's time at its provider: its deadline is this long after it is handed over (PROVIDER_JOB_TIMEOUT_MS). */
  providerJobTimeoutMs: number;
  /** The longest a job waits for an open breaker (or a used requests-per-minute window) before it fails (PROVIDER_BREAKER_WAIT_MS); unset: up to its deadline. */
  breakerWaitMs?: number;
  /**
   * Counts one request against a deployment's `limits.requestsPerMinute` (a one-minute window, shared by the nodes
   * through Redis when there is one): whether it may go now, and when the window ends.
   */
  deploymentRequest?(deploymentId: string, perMinute: number): Promise<{ allowed: boolean; resetAt: number }>;
  /** The deployments' circuit breakers (docs/routing.md): asked before each hand-over, told of each attempt's end. */
  breakers?: Breakers;
  /** Queued jobs expire after this long (QUEUE_TIMEOUT_MS, 10 minutes by default). */
  queueTimeoutMs: number;
  /** Whether the operator paused generation platform-wide; queued jobs then wait. */
  generationPaused(): boolean;
  /**
   * Cluster mode: whether the workspace's shard is being handed over to another node. Its queued jobs
   * then wait (the next owner starts them), so the jobs in flight can end here before the handover.
   */
  handingOver?(workspaceId: string): boolean;
  /** Cluster mode: the jobs in flight this node holds during the emergency stop, left out of a drain's count. */
  held?: HeldJobs;
  outputs: OutputStore;
  inputs: InputResolver;
  /**
   * Whose slots a job takes: its deployment's, when the catalog gives the deployment a concurrency of its own
   * (`deployment:<id>`), else its provider kind's (each kind's maxConcurrentJobs).
   */
  slotKeyOf(provider: string, deploymentId: string | null): string;
  /** Provider slots across workspaces (each provider's maxConcurrentJobs). */
  capacity: ProviderCapacity;
  billing: BillingDeps;
  webhooks: WebhookDeps;
  /** Generation transitions, provider calls and webhook attempts; undefined when metrics are off. */
  metrics?: WorkMetrics;
  /** Budget alerts (actors/workspace/budget-watch.ts): told when a workspace's money moved and committed. */
  budgets?: { moneyMoved(workspaceId: string): void };
  /** The live streams (runtime/live-events.ts): told of each generation transition once it committed. */
  live?: { publish(row: PublishedRow): void; publishOutput(output: Omit<LiveOutput, 'kind'>): void };
}

/** Billing as the workspace actor uses it: the payment provider, renewal timers, and plan-change news. */
export interface BillingDeps {
  provider: PaymentProvider;
  renewals: { schedule(workspaceId: string, subscriptionId: string, at: number): void };
  /** Called after a workspace's plan changed and was committed (cached key records carry the plan's rate limit). */
  planChanged(workspaceId: string): void;
  /**
   * The saved-card charges under way on this node, by workspace and purpose (actors/workspace/payments.ts):
   * made beside the workspace's mailbox, so kept here, where a reload of the actor's state does not forget them.
   */
  charges: Set<string>;
}

/** An actor's deps (ctx.deps, typed by its context). */
export function depsOf(ctx: { deps: ActorDeps }): ActorDeps {
  return ctx.deps;
}

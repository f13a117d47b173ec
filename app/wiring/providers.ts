import type { Config } from '../../runtime/config.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import type { Metrics } from '../../runtime/metrics/index.ts';
import type { RedisClient } from '../../runtime/redis.ts';
import { guardedFetcher } from '../../runtime/egress.ts';
import type { Database } from '../../persistence/database.ts';
import type { DeploymentRecord } from '../../domain/catalog/index.ts';
import { ProviderRegistry } from '../../providers/provider.ts';
import { localProvider } from '../../providers/local/provider.ts';
import { kindLimit } from '../../providers/kinds.ts';
import { DeploymentAdapters } from '../../providers/deployment-adapters.ts';
import { meteredProvider } from '../../providers/metered.ts';
import { createBreakers, type Breakers } from '../../providers/routing/breaker-store.ts';
import { ProviderCapacity } from '../../actors/generation/provider-capacity.ts';
import { SharedProviderCapacity, staleSlotsAmong } from '../../actors/generation/shared-provider-capacity.ts';
import type { ServedCatalog } from './catalog.ts';
import type { ClusterMembership } from './cluster.ts';
import type { StartSettings } from './start-settings.ts';

/** A deployment with a concurrency of its own in the catalog has slots of its own; the others share their kind's. */
const DEPLOYMENT_SLOTS = 'deployment:';

export interface Providers {
  providers: ProviderRegistry;
  /** The slots a job of a provider (and deployment) takes. */
  slotKeyOf: (provider: string, deploymentId: string | null) => string;
  capacity: ProviderCapacity;
  breakers: Breakers;
}

export interface ProvidersInput {
  config: Config;
  settings: StartSettings;
  clock: Clock;
  logger: Logger;
  metrics: Metrics | undefined;
  db: Database;
  redis: RedisClient | undefined;
  catalog: ServedCatalog;
  membership: ClusterMembership | undefined;
  /** Tells a workspace a provider slot freed (its actor schedules its queue). */
  wakeWorkspace: (workspaceId: string) => void;
}

/**
 * The providers: the built-in local one and an adapter per catalog deployment, made when a job first needs
 * it (docs/providers.md); their slots and the deployments' circuit breakers. The adapters close, and the
 * shared slots leave Redis, once the actors have stopped.
 */
export function buildProviders(stack: CleanupStack, input: ProvidersInput): Providers {
  const { config, clock, logger, metrics, db, redis, catalog, membership } = input;
  const deployments = catalog.deployments;
  // With metrics on, each provider's jobs are timed from submission to result (providers/metered.ts).
  const metered = (provider: Parameters<ProviderRegistry['add']>[0], deployment?: DeploymentRecord) =>
    metrics ? meteredProvider(provider, metrics.work, deployment?.id, deployment?.upstreamCostCents) : provider;
  const providers = new ProviderRegistry().add(
    metered(
      localProvider({
        clock,
        latencyMs: config.generations.localLatencyMs,
        failureRate: config.generations.localFailureRate,
        maxConcurrentJobs: config.generations.localMaxConcurrentJobs,
      }),
    ),
  );
  for (const [kind, settings] of input.settings.kinds) providers.addKind(kind, kindLimit(kind, settings));

  const slotKeyOf = (provider: string, deploymentId: string | null) =>
    deploymentId !== null && deployments.get(deploymentId)?.limits.concurrency !== undefined ? `${DEPLOYMENT_SLOTS}${deploymentId}` : provider;
  const limitOf = (name: string) =>
    name.startsWith(DEPLOYMENT_SLOTS) ? deployments.get(name.slice(DEPLOYMENT_SLOTS.length))?.limits.concurrency : providers.limitOf(name);
  // Cluster mode: each provider's limit holds across the nodes (a Redis set of the jobs holding its slots).
  // Each node sweeps the stale slots of the jobs of its own shards (and of jobs gone from the database).
  let capacity: ProviderCapacity;
  if (membership && redis) {
    const shared = new SharedProviderCapacity(limitOf, input.wakeWorkspace, {
      redis,
      prefix: config.redisKeyPrefix,
      logger,
      sweepMs: 30_000,
      finished: (ids) => staleSlotsAmong(db, ids, membership.ownedNow()),
    });
    stack.defer(() => shared.close());
    capacity = shared;
  } else {
    capacity = new ProviderCapacity(limitOf, input.wakeWorkspace);
  }
  // Circuit breakers of the deployments, shared through Redis when there is one (docs/routing.md).
  const breakers = createBreakers({
    redis,
    prefix: config.redisKeyPrefix,
    clock,
    logger,
    metrics: metrics?.breakers,
    deployments: () => catalog.source.current.deployments().map((d) => d.id),
    settings: { deployments: (id) => deployments.get(id)?.breaker },
  });

  const deploymentAdapters = new DeploymentAdapters({
    settings: input.settings.kinds,
    metered,
    now: () => clock.now(),
    jobTimeoutMs: config.providers.jobTimeoutMs,
    deployment: (id) => deployments.get(id),
    context: (deploymentId) => ({
      fetchOutput: guardedFetcher({
        maxBytes: config.providers.maxOutputBytes,
        timeoutMs: config.providers.requestTimeoutMs,
        allowPrivate: config.allowPrivateEgress,
        allowLoopback: config.allowLoopbackEgress,
      }),
      eventsUrl: `${config.baseUrl}/v1/providers/${encodeURIComponent(deploymentId)}/events`,
      maxResponseBytes: config.providers.maxResponseBytes,
      maxOutputBytes: config.providers.maxOutputBytes,
      // A deployment's own polling interval and cap on 429 calls (catalog `limits`), else the service's.
      pollIntervalMs: deployments.get(deploymentId)?.limits.pollMs ?? config.providers.pollMs,
      requestTimeoutMs: config.providers.requestTimeoutMs,
      ...(deployments.get(deploymentId)?.limits.rateLimitAttempts !== undefined
        ? { rateLimitAttempts: deployments.get(deploymentId)!.limits.rateLimitAttempts! }
        : {}),
      now: () => clock.now(),
      // The follower's polls, deadlines and waits run on the service's clock (a test's manual one).
      clock,
    }),
  });
  stack.defer(() => deploymentAdapters.close());
  // A deployment a reload gave another target gets a new adapter at its next job.
  deployments.onRetarget((deploymentId) => deploymentAdapters.retire(deploymentId));
  providers.serveDeployments((id) => deploymentAdapters.get(id));
  return { providers, slotKeyOf, capacity, breakers };
}

import type { Config } from '../../runtime/config.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import type { Metrics } from '../../runtime/metrics/index.ts';
import type { Telemetry } from '../../runtime/telemetry-sdk.ts';
import type { ActorBehavior } from '../../runtime/actor-behavior.ts';
import { ActorDirectory } from '../../runtime/actor-directory.ts';
import type { ServiceSwitches } from '../../runtime/switches.ts';
import { guardedFetcher } from '../../runtime/egress.ts';
import type { Database } from '../../persistence/database.ts';
import { keyHashesOf } from '../../persistence/stores/keys.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import type { ActorDeps } from '../../actors/deps.ts';
import type { ActorKinds, ServiceActorDirectory } from '../../actors/kinds.ts';
import { workspaceActor } from '../../actors/workspace/actor.ts';
import { generationActor } from '../../actors/generation/actor.ts';
import { nudgeQueuedWorkspaces } from '../../actors/generation/resume.ts';
import { blobOutputStore } from '../../actors/generation/blob-outputs.ts';
import { blobInputResolver, MAX_INPUT_BYTES } from '../../actors/generation/blob-inputs.ts';
import { LocalPaymentProvider } from '../../actors/billing/local/provider.ts';
import { RenewalScheduler } from '../../actors/billing/renewals.ts';
import { webhookEndpointActor } from '../../actors/webhook/actor.ts';
import { BudgetWatch } from '../../actors/workspace/budget-watch.ts';
import type { Auth } from './auth.ts';
import type { ServedCatalog } from './catalog.ts';
import type { ClusterMembership } from './cluster.ts';
import type { Providers } from './providers.ts';
import type { SharedBackEnds } from './shared-back-ends.ts';
import type { Stores } from './stores.ts';
import { withDeadline } from './deadline.ts';

export interface ActorsInput {
  config: Config;
  clock: Clock;
  logger: Logger;
  telemetry: Telemetry;
  metrics: Metrics | undefined;
  db: Database;
  writer: GroupCommitWriter;
  membership: ClusterMembership | undefined;
  shared: SharedBackEnds;
  auth: Auth;
  stores: Stores;
  switches: ServiceSwitches;
  catalog: ServedCatalog;
  providers: Providers;
  /** The service's public address, read when a payment page's URL is made. */
  publicUrl: () => string;
  /** Extra actor kinds (tests use these to probe the runtime). */
  behaviors: ActorBehavior<any, any, any>[];
}

export interface Actors {
  actors: ServiceActorDirectory;
  renewals: RenewalScheduler;
  paymentProvider: LocalPaymentProvider;
}

/**
 * The actor directory with the workspace, generation and webhook actors and what they are given. Its stop
 * drains the mailboxes (SHUTDOWN_TIMEOUT_MS at most) after the HTTP drain and the cluster handover, before
 * anything the actors use is closed.
 */
export function buildActors(stack: CleanupStack, input: ActorsInput): Actors {
  const { config, clock, logger, telemetry, metrics, db, membership, shared, auth, stores, switches, catalog, providers } = input;
  const actors = new ActorDirectory<ActorKinds, ActorDeps>({
    clock,
    logger,
    db,
    writer: input.writer,
    tracer: telemetry.tracer,
    tracing: telemetry.enabled,
    idleMs: config.actorIdleMs,
    ownership: membership?.shardHost,
    metrics: metrics?.actors,
  });
  const renewals = new RenewalScheduler({ clock, logger, db, actors });
  // Renewal timers are cancelled once the actors have stopped (a renewal due meanwhile is dropped by the
  // stopped directory, and scheduled again at the next start).
  stack.defer(() => renewals.stop());
  stack.defer(() => withDeadline(actors.stop(), config.shutdownTimeoutMs, () => logger.warn('shutdown: mailboxes not drained at the deadline')));
  for (const behavior of input.behaviors) actors.register(behavior);
  // Payments: the built-in local provider; its checkout and portal pages are served by this service.
  const paymentProvider = new LocalPaymentProvider({ secret: stores.billingSecret, baseUrl: input.publicUrl, clock });
  const { keyCache } = auth;
  const { keyBus } = shared;
  const shardHost = membership?.shardHost;
  const actorDeps: ActorDeps = {
    breakers: providers.breakers,
    live: shared.live,
    get catalog() {
      return catalog.source.current;
    },
    providers: providers.providers,
    deployment: (id) => catalog.deployments.get(id),
    slotKeyOf: providers.slotKeyOf,
    deploymentRequest: async (deploymentId, perMinute) => {
      const window = await auth.limiter.hit(`deployment:${deploymentId}`, perMinute, 60_000);
      return { allowed: window.allowed, resetAt: window.resetAt };
    },
    providerJobTimeoutMs: config.providers.jobTimeoutMs,
    breakerWaitMs: config.providers.breakerWaitMs,
    capacity: providers.capacity,
    queueTimeoutMs: config.generations.queueTimeoutMs,
    generationPaused: () => switches.generationPaused().paused,
    handingOver: shardHost ? (workspaceId) => shardHost.handingOver(workspaceId) : undefined,
    held: membership?.heldJobs,
    outputs: blobOutputStore(
      stores.blobs,
      db,
      () => clock.now(),
      () => catalog.source.current,
    ),
    inputs: blobInputResolver(
      stores.blobs,
      db,
      guardedFetcher({ maxBytes: MAX_INPUT_BYTES, timeoutMs: 30_000, allowPrivate: config.allowPrivateEgress, allowLoopback: config.allowLoopbackEgress }),
    ),
    // A plan change changes the rate limit cached with each key record of the workspace: dropped here at
    // once, and on the other nodes through the invalidation bus (one message per key of the workspace).
    billing: {
      provider: paymentProvider,
      renewals,
      charges: new Set(),
      planChanged: (workspaceId) => {
        keyCache.clear();
        if (!keyBus) return;
        void keyHashesOf(openUnit(db), workspaceId)
          .then((hashes) => Promise.all(hashes.map((hash) => keyCache.invalidate(hash))))
          .catch((error: unknown) =>
            logger.warn({ err: error, workspaceId }, 'could not announce a plan change to other nodes; their key records expire within a minute'),
          );
      },
    },
    webhooks: {
      secrets: stores.webhookSecrets,
      timeoutMs: config.webhooks.timeoutMs,
      allowPrivateEgress: config.allowPrivateEgress,
      allowLoopbackEgress: config.allowLoopbackEgress,
      tracer: telemetry.tracer,
      random: Math.random,
      attemptsInFlight: membership?.webhookAttempts,
      autoDisable: config.webhooks.autoDisable,
    },
    metrics: metrics?.work,
  };
  // Budget alerts: checked after each money move that committed, their events once per threshold and period.
  actorDeps.budgets = new BudgetWatch({
    db,
    clock,
    logger,
    catalog: () => catalog.source.current,
    wake: (endpointId) => actors.tell('whk', endpointId, { type: 'wake' }),
  });
  actors.provideDeps(actorDeps);
  actors.register(workspaceActor);
  actors.register(generationActor);
  // Releasing the emergency stop starts queued jobs again at once, not at the next request.
  switches.onChange((state) => {
    if (state.paused) return;
    nudgeQueuedWorkspaces(db, actors, shardHost ? (workspaceId) => shardHost.runsHere(workspaceId) : undefined).catch((error: unknown) =>
      logger.error({ err: error }, 'resuming queued generations failed'),
    );
  });
  actors.register(webhookEndpointActor);
  return { actors, renewals, paymentProvider };
}

import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { DestinationStream } from 'pino';
import type { PGlite } from '@electric-sql/pglite';
import { ActorDirectory } from '../runtime/actor-directory.ts';
import { InFlightCounter } from '../runtime/in-flight.ts';
import type { ActorBehavior } from '../runtime/actor-behavior.ts';
import { systemClock, type Clock } from '../runtime/clock.ts';
import type { Config } from '../runtime/config.ts';
import { HealthState } from '../runtime/health.ts';
import { createLogger } from '../runtime/logger.ts';
import { runRecovery, type RecoveryTask } from '../runtime/recovery.ts';
import type { ActorDeps } from '../actors/deps.ts';
import type { ActorKinds, ServiceActorDirectory } from '../actors/kinds.ts';
import { workspaceActor } from '../actors/workspace/actor.ts';
import { generationActor } from '../actors/generation/actor.ts';
import { generationRecovery } from '../actors/generation/recovery.ts';
import { jobsInFlightByShard } from '../actors/generation/in-flight-by-shard.ts';
import { HeldJobs } from '../actors/generation/held-jobs.ts';
import { nudgeQueuedWorkspaces } from '../actors/generation/resume.ts';
import { ProviderCapacity } from '../actors/generation/provider-capacity.ts';
import { SharedProviderCapacity, staleSlotsAmong } from '../actors/generation/shared-provider-capacity.ts';
import { ProviderRegistry } from '../providers/provider.ts';
import { localProvider } from '../providers/local/provider.ts';
import { ADAPTER_KINDS, kindLimit, readProviderSettings, targetProblems } from '../providers/kinds.ts';
import { DeploymentAdapters } from '../providers/deployment-adapters.ts';
import type { DeploymentRecord, ModelCatalog } from '../domain/catalog/index.ts';
import { blobOutputStore } from '../actors/generation/blob-outputs.ts';
import { blobInputResolver, MAX_INPUT_BYTES } from '../actors/generation/blob-inputs.ts';
import { guardedFetcher } from '../runtime/egress.ts';
import type { Services } from '../http/services.ts';
import { startTelemetry } from '../runtime/telemetry.ts';
import { startMetrics } from '../runtime/metrics/index.ts';
import { activeGenerationCounts, pendingDeliveryCount, poolCounts } from '../persistence/work-counts.ts';
import { meteredProvider } from '../providers/metered.ts';
import { createHttpServer, type HttpServer } from '../http/server.ts';
import { loadUws } from '../http/uws.ts';
import type { RouteDef } from '../http/route.ts';
import { routeTable } from '../http/routes/index.ts';
import { openDatabase, type Database } from '../persistence/database.ts';
import { GroupCommitWriter } from '../persistence/group-commit.ts';
import { availabilityOf } from '../persistence/availability.ts';
import { closeRedis, connectRedis, type RedisClient } from '../runtime/redis.ts';
import { MemoryRateLimiter, type RateLimiter } from '../http/auth/limiter.ts';
import { RedisRateLimiter } from '../http/auth/redis-limiter.ts';
import { MemoryAttemptStore, type AttemptStore } from '../http/auth/attempt-store.ts';
import { RedisAttemptStore } from '../http/auth/redis-attempt-store.ts';
import { KeyCache } from '../http/auth/key-cache.ts';
import { RedisKeyInvalidationBus } from '../http/auth/key-invalidation.ts';
import { KeyUsageRecorder } from '../http/auth/key-usage.ts';
import { ServiceSwitches } from '../runtime/switches.ts';
import { CatalogSource, readCatalogFileSync } from '../runtime/catalog-source.ts';
import { createBlobStore } from '../persistence/blob-store/index.ts';
import { LocalPaymentProvider } from '../actors/billing/local/provider.ts';
import { RenewalScheduler } from '../actors/billing/renewals.ts';
import { loadOrCreateSecret } from '../persistence/secret-file.ts';
import { SecretBox } from '../persistence/secret-box.ts';
import { webhookEndpointActor } from '../actors/webhook/actor.ts';
import { WEBHOOK_SECRET_PURPOSE } from '../actors/webhook/deps.ts';
import { webhookRecovery } from '../actors/webhook/restart-recovery.ts';
import { ClusterNode } from '../runtime/cluster/cluster-node.ts';
import { ShardHost } from '../runtime/cluster/shard-host.ts';
import { ClusterRouting } from '../runtime/cluster/routing.ts';
import { ShardOwners } from '../runtime/cluster/shard-owners.ts';
import { fenceShards } from '../persistence/cluster/fence.ts';
import { ownerAddressOf } from '../persistence/cluster/leases.ts';
import { startDeliveryRetention } from '../actors/webhook/retention.ts';
import { startIdempotencyKeyPurge } from '../actors/workspace/idempotency-retention.ts';
import { startSessionPurge } from '../http/auth/session-retention.ts';
import { LiveEvents } from '../runtime/live-events.ts';
import { createBreakers } from '../providers/routing/breaker-store.ts';
import { toGenerationDetailOut } from '../http/routes/generations/shape.ts';

/** Connections of the cluster node's own pool (rounds run one at a time; handovers beside them). */
const MEMBERSHIP_POOL = 3;

const packageJson = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

export interface StartOptions {
  config: Config;
  clock?: Clock;
  spanExporter?: SpanExporter;
  logDestination?: DestinationStream;
  /** Extra actor kinds and routes (tests use these to probe the runtime). */
  behaviors?: ActorBehavior<any, any, any>[];
  routes?: RouteDef[];
  recovery?: RecoveryTask[];
  /** DATABASE_URL=memory:// only: the PGlite to run on (tests pass one loaded from a migrated dump). */
  pglite?: PGlite;
}

export interface RunningService {
  services: Services;
  http: HttpServer;
  port: number;
  url: string;
  /** Graceful stop: refuse new work, finish what was accepted, flush writes, close the database. */
  stop(): Promise<void>;
  /** Settles once start-up recovery has run (whether it succeeded or failed: GET /health/ready tells which). */
  recovered: Promise<void>;
  /** `http://host:port/metrics`, the Prometheus scrape endpoint; undefined when it is off. */
  metricsUrl: string | undefined;
}

export class StartupError extends Error {
  /** The exit code `npm start` ends with: 78 (configuration) for a catalog that cannot be served, 1 otherwise. */
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'StartupError';
  }
}

/** Provider kinds the catalog may name: the built-in local one and the adapters' (providers/kinds.ts). */
const PROVIDER_KINDS = ['local', ...Object.keys(ADAPTER_KINDS)];

/** Builds every resource from configuration, in one place, and starts the service. */
export async function startService(options: StartOptions): Promise<RunningService> {
  const { config } = options;
  const { engine } = loadUws();
  if (engine === 'uws-fallback' && !config.allowUwsFallback) {
    throw new StartupError(
      'uWebSockets.js could not load its native addon and fell back to its slow pure-Node emulation; set ALLOW_UWS_FALLBACK=true to run on it anyway.',
    );
  }
  // Each provider kind's settings, then the catalog: either wrong stops the start before anything opens.
  const kinds = readProviderSettings(config.env);
  if (kinds.problems.length > 0) throw new StartupError(`provider settings:\n  ${kinds.problems.join('\n  ')}`, 78);
  const catalogBuild = {
    knownProviders: new Set<string>(PROVIDER_KINDS),
    configuredProviders: new Set<string>(['local', ...kinds.settings.keys()]),
    requestsPerMinuteOverrides: config.rateLimitOverrides,
    targetProblems,
    env: config.env,
  };
  const firstCatalog = readCatalogFileSync(config.catalog.file, catalogBuild);
  if (!firstCatalog.ok) {
    throw new StartupError(
      `the catalog file ${config.catalog.file} has ${firstCatalog.problems.length} problem${firstCatalog.problems.length === 1 ? '' : 's'}:\n  ${firstCatalog.problems.join('\n  ')}`,
      78,
    );
  }
  const telemetry = await startTelemetry(config.telemetry, { exporter: options.spanExporter, serviceVersion: packageJson.version });
  const logger = createLogger(config.logLevel, options.logDestination);
  const clock = options.clock ?? systemClock;
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, pglite: options.pglite });
  const metrics = await startMetrics(config.metrics, { serviceName: config.telemetry.serviceName, version: packageJson.version, logger });
  metrics?.observe({ pool: () => poolCounts(db), activeGenerations: () => activeGenerationCounts(db), pendingDeliveries: () => pendingDeliveryCount(db) });
  const cluster = config.cluster;
  // Cluster mode: every batch of actor writes is fenced on the shard leases its actors run under.
  const fence = cluster
    ? (em: Parameters<typeof fenceShards>[0], claims: Parameters<typeof fenceShards>[2]) =>
        fenceShards(em, cluster.nodeId, claims, { holdLimitMs: cluster.leaseMs })
    : undefined;
  const writer = new GroupCommitWriter(db, {
    windowMs: config.groupCommit.windowMs,
    maxBatch: config.groupCommit.maxBatch,
    tracer: telemetry.tracer,
    fence,
    onCommit: metrics && ((size, seconds) => metrics.persistence.committed(size, seconds)),
  });
  // Cluster mode: recovery per shard gained, actors only for the workspaces of owned shards.
  let actors: ServiceActorDirectory;
  const webhookAttempts = new InFlightCounter();
  // Jobs recovered during the emergency stop and held at no provider: a drain does not wait for them.
  const heldJobs = cluster ? new HeldJobs() : undefined;
  const shardHost = cluster
    ? new ShardHost({
        shardCount: cluster.shards,
        logger,
        drainMs: config.shutdownTimeoutMs,
        retryMs: cluster.heartbeatMs,
        recoverShard: (scope) => [
          generationRecovery(db, actors, clock, scope),
          webhookRecovery(db, actors, scope),
          { name: `subscription renewals of shard ${scope.shard}`, run: () => renewals.start(scope) },
        ],
        retire: (matches, drainMs) => actors.retireWorkspaces(matches, drainMs),
        jobsInFlight: jobsInFlightByShard(db, cluster.shards, { held: heldJobs }),
        shardLost: (matches) => heldJobs?.forget(matches),
        attemptsInFlight: (matches) => webhookAttempts.count(matches),
        flushWrites: () => writer.flush(),
      })
    : undefined;
  actors = new ActorDirectory<ActorKinds, ActorDeps>({
    clock,
    logger,
    db,
    writer,
    tracer: telemetry.tracer,
    tracing: telemetry.enabled,
    idleMs: config.actorIdleMs,
    ownership: shardHost,
    metrics: metrics?.actors,
  });
  for (const behavior of options.behaviors ?? []) actors.register(behavior);
  const health = new HealthState();
  // Shared back ends when REDIS_URL is set, in-process ones otherwise: chosen here, once.
  let redis: RedisClient | undefined;
  let keyBus: RedisKeyInvalidationBus | undefined;
  // Live streams: transitions published after commit, in process, or through Redis pub/sub (docs/streaming.md).
  const startLiveEvents = (client: RedisClient | undefined) =>
    LiveEvents.start({
      present: toGenerationDetailOut,
      now: () => clock.now(),
      logger,
      redis: client,
      channel: `${config.redisKeyPrefix}live-generations`,
    });
  let live: LiveEvents | undefined;
  if (config.redisUrl) {
    try {
      redis = await connectRedis(config.redisUrl, logger);
      keyBus = await RedisKeyInvalidationBus.connect(redis, `${config.redisKeyPrefix}api-key-invalidations`, logger);
      live = await startLiveEvents(redis);
    } catch (error) {
      await keyBus?.close().catch(() => {});
      redis?.destroy();
      await actors.stop();
      await db.close();
      await telemetry.shutdown();
      throw new StartupError(`Redis (REDIS_URL): ${(error as Error).message}`);
    }
  }
  live ??= await startLiveEvents(undefined);
  const limiter: RateLimiter = redis ? new RedisRateLimiter(redis, clock, config.redisKeyPrefix) : new MemoryRateLimiter(clock);
  const loginAttempts: AttemptStore = redis ? new RedisAttemptStore(redis, config.redisKeyPrefix) : new MemoryAttemptStore(clock);
  const keyCache = new KeyCache({ db, clock, logger, plans: () => catalogSource.current, bus: keyBus });
  keyBus?.listen((keyHash) => keyCache.drop(keyHash));
  const keyUsage = new KeyUsageRecorder({ db, clock, logger });
  // The local blob store's URLs point at the service; with PORT=0 its address is known only once listening.
  let blobs;
  let billingSecret: Buffer;
  let webhookSecrets: SecretBox;
  try {
    billingSecret = await loadOrCreateSecret(config.billing.signingSecret, config.dataDir, {
      file: 'billing-signing-secret',
      envName: 'BILLING_SIGNING_SECRET',
    });
    // WEBHOOK_SECRET_KEY, or one generated once and kept under DATA_DIR, as for the blob signing secret.
    webhookSecrets = new SecretBox(
      await loadOrCreateSecret(config.webhooks.secretKey, config.dataDir, { file: 'webhook-secret-key', envName: 'WEBHOOK_SECRET_KEY' }),
      WEBHOOK_SECRET_PURPOSE,
    );
    blobs = await createBlobStore(
      config.blobStore.kind === 's3'
        ? config.blobStore
        : { kind: 'local', dataDir: config.dataDir, baseUrl: () => services.publicUrl, signingSecret: config.blobStore.signingSecret },
      () => clock.now(),
    );
  } catch (error) {
    await keyUsage.close();
    await keyBus?.close();
    await closeRedis(redis);
    await actors.stop();
    await db.close();
    await telemetry.shutdown();
    throw new StartupError(`blob store, billing secret or webhook secret key: ${(error as Error).message}`);
  }
  // The emergency stop; on PGlite on disk the ops command reaches this server through <DATA_DIR>/ops.
  const switches = new ServiceSwitches({
    db,
    clock,
    logger,
    mailboxDir: db.kind === 'pglite' && config.databaseUrl !== 'memory://' ? path.join(config.dataDir, 'ops') : undefined,
  });
  await switches.start();
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
  // Payments: the built-in local provider; its checkout and portal pages are served by this service.
  const paymentProvider = new LocalPaymentProvider({ secret: billingSecret, baseUrl: () => services.publicUrl, clock });
  const renewals = new RenewalScheduler({ clock, logger, db, actors });
  // The real providers: an adapter per catalog deployment, made when a job first needs it (docs/providers.md).
  const deploymentAdapters = new DeploymentAdapters({
    settings: kinds.settings,
    metered,
    now: () => clock.now(),
    jobTimeoutMs: config.providers.jobTimeoutMs,
    deployment: (id) => deploymentBook.get(id),
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
      pollIntervalMs: config.providers.pollMs,
      requestTimeoutMs: config.providers.requestTimeoutMs,
      now: () => clock.now(),
    }),
  });
  for (const [kind, settings] of kinds.settings) providers.addKind(kind, kindLimit(kind, settings));
  providers.serveDeployments((id) => deploymentAdapters.get(id));
  // Every deployment of every catalog served since the start: a job of one a reload removed finishes on it.
  const deploymentBook = new Map<string, DeploymentRecord>();
  const remember = (catalog: ModelCatalog) => {
    for (const deployment of catalog.deployments()) {
      const before = deploymentBook.get(deployment.id);
      deploymentBook.set(deployment.id, deployment);
      if (before && JSON.stringify(before.target) !== JSON.stringify(deployment.target)) deploymentAdapters.retire(deployment.id);
    }
  };
  remember(firstCatalog.catalog);
  // The catalog served, reloaded on SIGHUP and when its file changes; each request reads the one current then.
  const catalogSource = new CatalogSource(firstCatalog.catalog, {
    file: config.catalog.file,
    build: catalogBuild,
    pollMs: config.catalog.pollMs,
    onRefused: (problems) => {
      metrics?.catalog.reloaded('refused');
      logger.error({ file: config.catalog.file, problems }, 'the catalog file was refused; the catalog served stays as it was');
    },
    onChanged: (catalog) => {
      metrics?.catalog.reloaded('applied');
      remember(catalog);
      // Cached key records carry their plan's rate limit: read again with the new plans.
      keyCache.clear();
      logger.info({ file: config.catalog.file, version: catalog.version, models: catalog.all().length, plans: catalog.plans().length }, 'catalog reloaded');
    },
  });
  metrics?.catalog.observe(() => catalogSource.current.version);
  catalogSource.start();
  // A deployment with a concurrency of its own in the catalog has slots of its own; the others share their kind's.
  const DEPLOYMENT_SLOTS = 'deployment:';
  const slotKeyOf = (provider: string, deploymentId: string | null) =>
    deploymentId !== null && deploymentBook.get(deploymentId)?.limits.concurrency !== undefined ? `${DEPLOYMENT_SLOTS}${deploymentId}` : provider;
  const limitOf = (name: string) =>
    name.startsWith(DEPLOYMENT_SLOTS) ? deploymentBook.get(name.slice(DEPLOYMENT_SLOTS.length))?.limits.concurrency : providers.limitOf(name);
  const wakeWorkspace = (workspaceId: string) => actors.tell('ws', workspaceId, { type: 'schedule' });
  // Cluster mode: each provider's limit holds across the nodes (a Redis set of the jobs holding its slots).
  // Each node sweeps the stale slots of the jobs of its own shards (and of jobs gone from the database).
  const sharedCapacity =
    cluster && redis
      ? new SharedProviderCapacity(limitOf, wakeWorkspace, {
          redis,
          prefix: config.redisKeyPrefix,
          logger,
          sweepMs: 30_000,
          finished: (ids) => staleSlotsAmong(db, ids, { shards: clusterNode?.ownedShards().map((lease) => lease.shard) ?? [], shardCount: cluster.shards }),
        })
      : undefined;
  const capacity = sharedCapacity ?? new ProviderCapacity(limitOf, wakeWorkspace);
  // Circuit breakers of the deployments, shared through Redis when there is one (docs/routing.md).
  const breakers = createBreakers({
    redis,
    prefix: config.redisKeyPrefix,
    clock,
    logger,
    metrics: metrics?.breakers,
    deployments: () => catalogSource.current.deployments().map((d) => d.id),
    settings: { deployments: (id) => deploymentBook.get(id)?.breaker },
  });
  const actorDeps: ActorDeps = {
    breakers,
    live,
    get catalog() {
      return catalogSource.current;
    },
    providers,
    deployment: (id) => deploymentBook.get(id),
    slotKeyOf,
    deploymentRequest: async (deploymentId, perMinute) => {
      const window = await limiter.hit(`deployment:${deploymentId}`, perMinute, 60_000);
      return { allowed: window.allowed, resetAt: window.resetAt };
    },
    providerJobTimeoutMs: config.providers.jobTimeoutMs,
    capacity,
    queueTimeoutMs: config.generations.queueTimeoutMs,
    generationPaused: () => switches.generationPaused().paused,
    handingOver: shardHost ? (workspaceId) => shardHost.handingOver(workspaceId) : undefined,
    held: heldJobs,
    outputs: blobOutputStore(
      blobs,
      db,
      () => clock.now(),
      () => catalogSource.current,
    ),
    inputs: blobInputResolver(
      blobs,
      db,
      guardedFetcher({ maxBytes: MAX_INPUT_BYTES, timeoutMs: 30_000, allowPrivate: config.allowPrivateEgress, allowLoopback: config.allowLoopbackEgress }),
    ),
    // A plan change changes the rate limit cached with each key record of the workspace: dropped here at
    // once, and on the other nodes through the invalidation bus (one message per key of the workspace).
    billing: {
      provider: paymentProvider,
      renewals,
      planChanged: (workspaceId) => {
        keyCache.clear();
        if (!keyBus) return;
        void db
          .em()
          .execute<Array<{ key_hash: string }>>('select key_hash from api_keys where workspace_id = ?', [workspaceId])
          .then((rows) => Promise.all(rows.map((row) => keyCache.invalidate(row.key_hash))))
          .catch((error: unknown) =>
            logger.warn({ err: error, workspaceId }, 'could not announce a plan change to other nodes; their key records expire within a minute'),
          );
      },
    },
    webhooks: {
      secrets: webhookSecrets,
      timeoutMs: config.webhooks.timeoutMs,
      allowPrivateEgress: config.allowPrivateEgress,
      allowLoopbackEgress: config.allowLoopbackEgress,
      tracer: telemetry.tracer,
      random: Math.random,
      attemptsInFlight: cluster ? webhookAttempts : undefined,
      autoDisable: config.webhooks.autoDisable,
    },
    metrics: metrics?.work,
  };
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
  // Cluster mode: each node prunes the endpoints of the shards it owns at the time, so each once in the cluster.
  const ownedNow = cluster ? () => ({ shards: clusterNode?.ownedShards().map((lease) => lease.shard) ?? [], shardCount: cluster.shards }) : undefined;
  const webhookRetention = startDeliveryRetention(db, clock, logger, ownedNow);
  // Stored Idempotency-Keys past their 24 hours, likewise each by the node that owns its workspace.
  const idempotencyPurge = startIdempotencyKeyPurge(db, clock, logger, ownedNow);
  // Sessions past their expiry whose cookie never came back (every node; each row is deleted once).
  const sessionPurge = startSessionPurge(db, clock, logger);
  const services: Services = {
    config,
    publicUrl: config.baseUrl,
    version: packageJson.version,
    engine,
    clock,
    logger,
    tracer: telemetry.tracer,
    metrics,
    db,
    writer,
    actors,
    health,
    redis,
    limiter,
    loginAttempts,
    keyCache,
    keyUsage,
    blobs,
    switches,
    webhookSecrets,
    catalogSource,
    providers,
    get catalog() {
      return catalogSource.current;
    },
    breakers,
    billing: { provider: paymentProvider, local: paymentProvider, renewals },
    live,
  };
  const closeShared = async () => {
    catalogSource.stop();
    await deploymentAdapters.close();
    renewals.stop();
    await sharedCapacity?.close();
    await webhookRetention.stop();
    await idempotencyPurge.stop();
    await sessionPurge.stop();
    await switches.stop();
    await blobs.close();
    await keyUsage.close();
    await keyBus?.close();
    await live.close();
    await closeRedis(redis);
  };

  // Cluster mode: the node joins once listening; each shard it gains recovers that shard's work only.
  // Its heartbeats and lease statements have connections of their own: queued behind the loads of
  // thousands of actors (a shard just gained), they could be late past CLUSTER_DEAD_AFTER_MS.
  let membershipDb: Database | undefined;
  if (cluster) {
    try {
      membershipDb = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMax: MEMBERSHIP_POOL, migrate: false });
    } catch (error) {
      await actors.stop();
      await closeShared();
      await db.close();
      await telemetry.shutdown();
      throw new StartupError(`database (the cluster node's connections): ${(error as Error).message}`);
    }
  }
  const clusterNode =
    cluster && shardHost && membershipDb
      ? new ClusterNode({
          db: membershipDb,
          nodeId: cluster.nodeId,
          address: `${cluster.internalAddress}:${cluster.internalPort}`,
          shardCount: cluster.shards,
          heartbeatMs: cluster.heartbeatMs,
          deadAfterMs: cluster.deadAfterMs,
          leaseMs: cluster.leaseMs,
          logger,
          drain: shardHost.drain,
        })
      : undefined;
  if (clusterNode && shardHost && cluster) {
    shardHost.attach(clusterNode);
    // A lost shard's renewal timers go with it: its next owner scheduled them when it gained the shard.
    clusterNode.on('lost', (lease) => renewals.cancelWhere((workspaceId) => shardHost.shardOf(workspaceId) === lease.shard));
    if (metrics) {
      metrics.cluster.observe(() => clusterNode.ownedShards().length);
      clusterNode.on('gained', () => metrics.cluster.gained());
      clusterNode.on('lost', (_lease, reason) => metrics.cluster.lost(String(reason)));
    }
    const owners = new ShardOwners((shard) => ownerAddressOf(db.em(), shard));
    owners.attach(clusterNode);
    services.cluster = new ClusterRouting(owners, clusterNode, shardHost, cluster.secret);
  }
  const http = createHttpServer(services, routeTable(options.routes), { tracing: telemetry.enabled, metrics: metrics?.http });
  /** A listener could not be opened: what was started stops again, and start-up fails with the error and `hint`. */
  const abandonStart = async (error: unknown, hint: string): Promise<never> => {
    http.stopAccepting();
    await actors.stop();
    await closeShared();
    await membershipDb?.close();
    await db.close();
    await metrics?.shutdown();
    await telemetry.shutdown();
    throw new StartupError(`${(error as Error).message}${hint}`);
  };
  let port: number;
  try {
    port = await http.listen(config.host, config.port);
  } catch (error) {
    return abandonStart(error, ': is the port in use?');
  }
  // GET /metrics on a listener of its own, which the API's users (and their keys) do not reach.
  let metricsUrl: string | undefined;
  try {
    const metricsPort = await metrics?.listen();
    const metricsHost = config.metrics.host.includes(':') ? `[${config.metrics.host}]` : config.metrics.host;
    if (metricsPort !== undefined) metricsUrl = `http://${metricsHost}:${metricsPort}/metrics`;
  } catch (error) {
    return abandonStart(error, ' (METRICS_HOST:METRICS_PORT, the metrics endpoint): is the port in use? OTEL_METRICS_EXPORTER=none turns it off');
  }
  if (cluster) {
    try {
      await http.listen(config.host, cluster.internalPort);
    } catch (error) {
      return abandonStart(error, ' (CLUSTER_INTERNAL_PORT): is the port in use?');
    }
  }
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  if (new URL(config.baseUrl).port === '0') services.publicUrl = url;

  const recoveryTasks: RecoveryTask[] =
    clusterNode && shardHost
      ? [
          {
            name: 'cluster shards',
            run: async () => {
              await clusterNode.start();
              await shardHost.recovered();
              return clusterNode.ownedShards().length;
            },
          },
        ]
      : [generationRecovery(db, actors, clock), webhookRecovery(db, actors), { name: 'subscription renewals', run: () => renewals.start() }];

  // Recovery runs after listening so probes see 503 until it is done.
  const recovered = runRecovery([...recoveryTasks, ...(options.recovery ?? [])], logger).then(
    () => {
      health.recovered = true;
    },
    (error: unknown) => {
      health.recoveryError = (error as Error).message;
      logger.error({ err: error }, 'recovery failed; the service stays not ready');
    },
  );

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      health.draining = true;
      http.stopAccepting();
      // Live streams would never end by themselves: closed now, each with a reconnect hint.
      http.closeStreams();
      await withDeadline(recovered, config.shutdownTimeoutMs, () => logger.warn('shutdown: recovery still running at the deadline'));
      await withDeadline(http.idle(), config.shutdownTimeoutMs, () =>
        logger.warn({ inFlight: http.inFlight() }, 'shutdown: requests still in flight at the deadline'),
      );
      // Each shard drained (mailboxes emptied, writes flushed, actors stopped), then handed over.
      if (clusterNode)
        await clusterNode
          .stop()
          .catch((error: unknown) => logger.error({ err: error }, 'shutdown: leaving the cluster failed; the others take its shards once its leases expire'));
      await withDeadline(actors.stop(), config.shutdownTimeoutMs, () => logger.warn('shutdown: mailboxes not drained at the deadline'));
      await closeShared();
      // Writes still waiting for an unreachable database are given up (the next start recovers their jobs).
      await writer.close();
      // The last OTLP export reads the database-backed gauges: before the database closes.
      await metrics?.shutdown();
      availabilityOf(db).close();
      await membershipDb?.close();
      await db.close();
      await telemetry.shutdown();
      // Idle keep-alive connections would otherwise hold the process until each client times them out.
      http.closeConnections();
      logger.info('stopped');
    })();
    return stopping;
  };

  return { services, http, port, url, stop, recovered, metricsUrl };
}

async function withDeadline(work: Promise<void>, ms: number, onLate: () => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      onLate();
      resolve();
    }, ms);
  });
  await Promise.race([work, late]);
  clearTimeout(timer);
}

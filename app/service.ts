import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { DestinationStream } from 'pino';
import type { PGlite } from '@electric-sql/pglite';
import type { ActorBehavior } from '../runtime/actor-behavior.ts';
import { CleanupStack } from '../runtime/cleanup-stack.ts';
import { systemClock, type Clock } from '../runtime/clock.ts';
import type { Config } from '../runtime/config.ts';
import { HealthState } from '../runtime/health.ts';
import { createLogger } from '../runtime/logger.ts';
import type { RecoveryTask } from '../runtime/recovery.ts';
import { generationRecovery } from '../actors/generation-recovery.ts';
import { webhookRecovery } from '../actors/webhook/restart-recovery.ts';
import type { HttpServer } from '../http/server.ts';
import type { RouteDef } from '../http/route.ts';
import type { Services } from '../http/services.ts';
import { buildActors } from './wiring/actors.ts';
import { buildAuth } from './wiring/auth.ts';
import { buildCatalog, followCatalogFile } from './wiring/catalog.ts';
import { buildClusterMembership, joinCluster } from './wiring/cluster.ts';
import { withDeadline } from './wiring/deadline.ts';
import { startHousekeeping } from './wiring/housekeeping.ts';
import { buildHttp } from './wiring/http.ts';
import { buildMetrics, buildTelemetry } from './wiring/observability.ts';
import { buildDatabases, buildWriter } from './wiring/persistence.ts';
import { buildProviders } from './wiring/providers.ts';
import { startRecovery } from './wiring/recovery.ts';
import { buildSharedBackEnds } from './wiring/shared-back-ends.ts';
import { packageJson, readStartSettings } from './wiring/start-settings.ts';
import { buildStores, buildSwitches } from './wiring/stores.ts';

export { StartupError } from './wiring/startup-error.ts';

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

/**
 * Builds every resource from configuration, in one place, and starts the service. Each step registers its
 * clean-up on one stack as it builds, so the stop runs them in reverse order of building, and a start that
 * fails half-way releases exactly what was built (docs/architecture.md, The composition root).
 */
export async function startService(options: StartOptions): Promise<RunningService> {
  const { config } = options;
  // Each provider kind's settings, then the catalog: either wrong stops the start before anything opens.
  const settings = readStartSettings(config);
  const logger = createLogger(config.logLevel, options.logDestination);
  const stack = new CleanupStack();
  try {
    return await startOn(stack, options, settings, logger);
  } catch (error) {
    await stack.disposeAsync().catch((cleanupError: unknown) => logger.error({ err: cleanupError }, 'start-up failed, and so did releasing what it had built'));
    throw error;
  }
}

async function startOn(
  stack: CleanupStack,
  options: StartOptions,
  settings: ReturnType<typeof readStartSettings>,
  logger: ReturnType<typeof createLogger>,
): Promise<RunningService> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  // Disposed after every other step: what must happen last of all goes here.
  const last = stack.use(new CleanupStack());
  const telemetry = await buildTelemetry(stack, config, options.spanExporter);
  const databases = await buildDatabases(stack, config, options.pglite);
  const { db } = databases;
  const metrics = await buildMetrics(stack, config, logger, db);
  const writer = buildWriter(stack, config, db, telemetry, metrics);
  const shared = await buildSharedBackEnds(stack, config, clock, logger);
  const catalog = buildCatalog(config, settings, metrics, logger);
  const auth = buildAuth(stack, config, db, clock, logger, shared, catalog);
  const publicUrl = () => services.publicUrl;
  const stores = await buildStores(stack, config, clock, publicUrl);
  const switches = await buildSwitches(stack, config, db, clock, logger);
  const membership = buildClusterMembership(config, logger, databases, writer, {
    recoverShard: (scope) => [
      generationRecovery(db, actors, clock, scope),
      webhookRecovery(db, actors, scope),
      { name: `subscription renewals of shard ${scope.shard}`, run: () => renewals.start(scope) },
    ],
    retire: (matches, drainMs) => actors.retireWorkspaces(matches, drainMs),
  });
  startHousekeeping(stack, db, clock, logger, membership?.ownedNow);
  const providers = buildProviders(stack, {
    config,
    settings,
    clock,
    logger,
    metrics,
    db,
    redis: shared.redis,
    catalog,
    membership,
    wakeWorkspace: (workspaceId) => actors.tell('ws', workspaceId, { type: 'schedule' }),
  });
  followCatalogFile(stack, catalog, metrics);
  const { actors, renewals, paymentProvider } = buildActors(stack, {
    config,
    clock,
    logger,
    telemetry,
    metrics,
    db,
    writer,
    membership,
    shared,
    auth,
    stores,
    switches,
    catalog,
    providers,
    publicUrl,
    behaviors: options.behaviors ?? [],
  });
  const health = new HealthState();
  const services: Services = {
    config,
    publicUrl: config.baseUrl,
    version: packageJson.version,
    engine: settings.engine,
    clock,
    logger,
    tracer: telemetry.tracer,
    metrics,
    db,
    writer,
    actors,
    health,
    redis: shared.redis,
    limiter: auth.limiter,
    loginAttempts: auth.loginAttempts,
    keyCache: auth.keyCache,
    keyUsage: auth.keyUsage,
    blobs: stores.blobs,
    switches,
    webhookSecrets: stores.webhookSecrets,
    catalogSource: catalog.source,
    providers: providers.providers,
    get catalog() {
      return catalog.source.current;
    },
    breakers: providers.breakers,
    billing: { provider: paymentProvider, local: paymentProvider, renewals },
    live: shared.live,
  };
  // Cluster mode: the node joins once listening, in recovery; each shard it gains recovers that shard's work only.
  if (membership) services.cluster = joinCluster(stack, membership, db, renewals, metrics, logger);
  const { http, port, metricsUrl } = await buildHttp(stack, last, { config, logger, services, routes: options.routes, telemetry, metrics });
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  if (new URL(config.baseUrl).port === '0') services.publicUrl = url;

  const recovered = startRecovery({ db, actors, renewals, clock, logger, health }, membership, options.recovery ?? []);
  // The first clean-up of the stop: no new work is taken; live streams, which would never end by
  // themselves, are closed now, each with a reconnect hint; then recovery is waited for.
  stack.defer(async () => {
    health.draining = true;
    http.stopAccepting();
    http.closeStreams();
    await withDeadline(recovered, config.shutdownTimeoutMs, () => logger.warn('shutdown: recovery still running at the deadline'));
  });

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= stack.disposeAsync().then(() => logger.info('stopped'));
    return stopping;
  };
  return { services, http, port, url, stop, recovered, metricsUrl };
}

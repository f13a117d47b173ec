import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { DestinationStream } from 'pino';
import { ActorDirectory } from './actor-directory.ts';
import type { ActorBehavior } from './actor-behavior.ts';
import { systemClock, type Clock } from './clock.ts';
import type { Config } from './config.ts';
import { HealthState } from './health.ts';
import { createLogger } from './logger.ts';
import { runRecovery, type RecoveryTask } from './recovery.ts';
import type { ActorDeps } from '../actors/deps.ts';
import { workspaceActor } from '../actors/workspace/actor.ts';
import { generationActor } from '../actors/generation/actor.ts';
import { generationRecovery } from '../actors/generation/recovery.ts';
import { nudgeQueuedWorkspaces } from '../actors/generation/resume.ts';
import { ProviderCapacity } from '../actors/generation/provider-capacity.ts';
import { ProviderRegistry } from '../actors/generation/providers/provider.ts';
import { localProvider } from '../actors/generation/providers/local/provider.ts';
import { openAiProvider } from '../actors/generation/providers/openai/provider.ts';
import { blobOutputStore } from '../actors/generation/blob-outputs.ts';
import { blobInputResolver, MAX_INPUT_BYTES } from '../actors/generation/blob-inputs.ts';
import { guardedFetcher } from './egress.ts';
import type { Services } from './services.ts';
import { startTelemetry } from './telemetry.ts';
import { createHttpServer, type HttpServer } from '../http/server.ts';
import { loadUws } from '../http/uws.ts';
import type { RouteDef } from '../http/route.ts';
import { routeTable } from '../http/routes/index.ts';
import { openDatabase } from '../persistence/database.ts';
import { SnapshotWriter } from '../persistence/snapshot-writer.ts';
import { closeRedis, connectRedis, type RedisClient } from './redis.ts';
import { MemoryRateLimiter, type RateLimiter } from '../http/auth/limiter.ts';
import { RedisRateLimiter } from '../http/auth/redis-limiter.ts';
import { KeyCache } from '../http/auth/key-cache.ts';
import { RedisKeyInvalidationBus } from '../http/auth/key-invalidation.ts';
import { KeyUsageRecorder } from '../http/auth/key-usage.ts';
import { ServiceSwitches } from './switches.ts';
import { ModelCatalog } from '../actors/generation/catalog/index.ts';
import { createBlobStore } from '../persistence/blob-store/index.ts';
import { LocalPaymentProvider } from '../actors/billing/local/provider.ts';
import { RenewalScheduler } from '../actors/billing/renewals.ts';
import { loadOrCreateSecret } from '../persistence/secret-file.ts';
import { SecretBox } from '../persistence/secret-box.ts';
import { webhookEndpointActor } from '../actors/webhook/actor.ts';
import { WEBHOOK_SECRET_PURPOSE } from '../actors/webhook/deps.ts';
import { webhookRecovery } from '../actors/webhook/recovery.ts';
import { startDeliveryRetention } from '../actors/webhook/retention.ts';

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
}

export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}

/** Builds every resource from configuration, in one place, and starts the service. */
export async function startService(options: StartOptions): Promise<RunningService> {
  const { config } = options;
  const { engine } = loadUws();
  if (engine === 'uws-fallback' && !config.allowUwsFallback) {
    throw new StartupError('uWebSockets.js could not load its native addon and fell back to its slow pure-Node emulation; set ALLOW_UWS_FALLBACK=true to run on it anyway.');
  }
  const telemetry = startTelemetry(config.telemetry, { exporter: options.spanExporter });
  const logger = createLogger(config.logLevel, options.logDestination);
  const clock = options.clock ?? systemClock;
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  const writer = new SnapshotWriter(db, { windowMs: config.groupCommit.windowMs, maxBatch: config.groupCommit.maxBatch, tracer: telemetry.tracer });
  const actors = new ActorDirectory({ clock, logger, db, writer, tracer: telemetry.tracer, tracing: telemetry.enabled, idleMs: config.actorIdleMs });
  for (const behavior of options.behaviors ?? []) actors.register(behavior);
  const health = new HealthState();
  // Shared back ends when REDIS_URL is set, in-process ones otherwise: chosen here, once.
  let redis: RedisClient | undefined;
  let keyBus: RedisKeyInvalidationBus | undefined;
  if (config.redisUrl) {
    try {
      redis = await connectRedis(config.redisUrl, logger);
      keyBus = await RedisKeyInvalidationBus.connect(redis, `${config.redisKeyPrefix}api-key-invalidations`, logger);
    } catch (error) {
      redis?.destroy();
      await actors.stop();
      await db.close();
      await telemetry.shutdown();
      throw new StartupError(`Redis (REDIS_URL): ${(error as Error).message}`);
    }
  }
  const limiter: RateLimiter = redis ? new RedisRateLimiter(redis, clock, config.redisKeyPrefix) : new MemoryRateLimiter(clock);
  const keyCache = new KeyCache({ db, clock, logger, rateLimits: config.rateLimits, bus: keyBus });
  keyBus?.listen((keyHash) => keyCache.drop(keyHash));
  const keyUsage = new KeyUsageRecorder({ db, clock, logger });
  // The local blob store's URLs point at the service; with PORT=0 its address is known only once listening.
  let blobs;
  let billingSecret: Buffer;
  let webhookSecrets: SecretBox;
  try {
    billingSecret = await loadOrCreateSecret(config.billing.signingSecret, config.dataDir, { file: 'billing-signing-secret', envName: 'BILLING_SIGNING_SECRET' });
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
    db, clock, logger, mailboxDir: db.kind === 'pglite' && config.databaseUrl !== 'memory://' ? path.join(config.dataDir, 'ops') : undefined,
  });
  await switches.start();
  const providers = new ProviderRegistry().add(localProvider({
    clock, latencyMs: config.generations.localLatencyMs, failureRate: config.generations.localFailureRate,
    maxConcurrentJobs: config.generations.localMaxConcurrentJobs,
  }));
  // Payments: the built-in local provider; its checkout and portal pages are served by this service.
  const paymentProvider = new LocalPaymentProvider({ secret: billingSecret, baseUrl: () => services.publicUrl, clock });
  const renewals = new RenewalScheduler({ clock, logger, db, actors });
  if (config.openai) {
    const { baseUrl, apiKey, chatModel, imageModel, timeoutMs, maxConcurrentJobs } = config.openai;
    providers.add(openAiProvider({
      baseUrl, apiKey, chatModel, imageModel, timeoutMs, maxConcurrentJobs,
      fetchOutput: guardedFetcher({ maxBytes: MAX_INPUT_BYTES, timeoutMs, allowPrivate: config.allowPrivateEgress }),
    }));
  }
  // Models whose provider this service runs: local always, openai/* when OPENAI_BASE_URL is set.
  const catalog = new ModelCatalog(undefined, (provider) => providers.has(provider));
  const capacity = new ProviderCapacity((name) => providers.get(name)?.maxConcurrentJobs, (workspaceId) => actors.tell('ws', workspaceId, { type: 'schedule' }));
  const actorDeps: ActorDeps = {
    catalog,
    providers,
    capacity,
    queueTimeoutMs: config.generations.queueTimeoutMs,
    generationPaused: () => switches.generationPaused().paused,
    outputs: blobOutputStore(blobs, db, () => clock.now()),
    inputs: blobInputResolver(blobs, db, guardedFetcher({ maxBytes: MAX_INPUT_BYTES, timeoutMs: 30_000, allowPrivate: config.allowPrivateEgress })),
    // A plan change changes the rate limit cached with each key record of the workspace: dropped here at
    // once, and on the other nodes through the invalidation bus (one message per key of the workspace).
    billing: {
      provider: paymentProvider,
      renewals,
      planChanged: (workspaceId) => {
        keyCache.clear();
        if (!keyBus) return;
        void db.em().execute<Array<{ key_hash: string }>>('select key_hash from api_keys where workspace_id = ?', [workspaceId])
          .then((rows) => Promise.all(rows.map((row) => keyCache.invalidate(row.key_hash))))
          .catch((error: unknown) => logger.warn({ err: error, workspaceId }, 'could not announce a plan change to other nodes; their key records expire within a minute'));
      },
    },
    webhooks: {
      secrets: webhookSecrets, timeoutMs: config.webhooks.timeoutMs, allowPrivateEgress: config.allowPrivateEgress,
      tracer: telemetry.tracer, random: Math.random,
    },
  };
  actors.provideDeps(actorDeps);
  actors.register(workspaceActor);
  actors.register(generationActor);
  // Releasing the emergency stop starts queued jobs again at once, not at the next request.
  switches.onChange((state) => {
    if (state.paused) return;
    nudgeQueuedWorkspaces(db, actors).catch((error: unknown) => logger.error({ err: error }, 'resuming queued generations failed'));
  });
  actors.register(webhookEndpointActor);
  const webhookRetention = startDeliveryRetention(db, clock, logger);
  const services: Services = {
    config, publicUrl: config.baseUrl, version: packageJson.version, engine, clock, logger, tracer: telemetry.tracer, db, writer, actors, health,
    redis, limiter, keyCache, keyUsage, blobs, switches, catalog, webhookSecrets,
    billing: { provider: paymentProvider, local: paymentProvider, renewals },
  };
  const closeShared = async () => {
    renewals.stop();
    await webhookRetention.stop();
    await switches.stop();
    await blobs.close();
    await keyUsage.close();
    await keyBus?.close();
    await closeRedis(redis);
  };

  const http = createHttpServer(services, routeTable(options.routes), { tracing: telemetry.enabled });
  let port: number;
  try {
    port = await http.listen(config.host, config.port);
  } catch (error) {
    await actors.stop();
    await closeShared();
    await db.close();
    await telemetry.shutdown();
    throw new StartupError(`${(error as Error).message}: is the port in use?`);
  }
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  if (new URL(config.baseUrl).port === '0') services.publicUrl = url;

  // Recovery runs after listening so probes see 503 until it is done.
  const recovered = runRecovery([generationRecovery(db, actors), webhookRecovery(db, actors), { name: 'subscription renewals', run: () => renewals.start() }, ...(options.recovery ?? [])], logger).then(
    () => { health.recovered = true; },
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
      await withDeadline(recovered, config.shutdownTimeoutMs, () => logger.warn('shutdown: recovery still running at the deadline'));
      await withDeadline(http.idle(), config.shutdownTimeoutMs, () => logger.warn({ inFlight: http.inFlight() }, 'shutdown: requests still in flight at the deadline'));
      await withDeadline(actors.stop(), config.shutdownTimeoutMs, () => logger.warn('shutdown: mailboxes not drained at the deadline'));
      await closeShared();
      await writer.close();
      await db.close();
      await telemetry.shutdown();
      logger.info('stopped');
    })();
    return stopping;
  };

  return { services, http, port, url, stop, recovered };
}

async function withDeadline(work: Promise<void>, ms: number, onLate: () => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => { onLate(); resolve(); }, ms);
  });
  await Promise.race([work, late]);
  clearTimeout(timer);
}

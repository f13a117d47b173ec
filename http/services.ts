import type { Tracer } from '@opentelemetry/api';
import type { Clock } from '../runtime/clock.ts';
import type { Config } from '../runtime/config.ts';
import type { Logger } from '../runtime/logger.ts';
import type { HealthState } from '../runtime/health.ts';
import type { ServiceActorDirectory } from '../actors/kinds.ts';
import type { Database } from '../persistence/database.ts';
import type { GroupCommitWriter } from '../persistence/group-commit.ts';
import type { RedisClient } from '../runtime/redis.ts';
import type { RateLimiter } from './auth/limiter.ts';
import type { AttemptStore } from './auth/attempt-store.ts';
import type { KeyCache } from './auth/key-cache.ts';
import type { KeyUsageRecorder } from './auth/key-usage.ts';
import type { ServiceSwitches } from '../runtime/switches.ts';
import type { ModelCatalog } from '../domain/catalog/index.ts';
import type { CatalogSource } from '../runtime/catalog-source.ts';
import type { ProviderRegistry } from '../providers/provider.ts';
import type { BlobStore } from '../persistence/blob-store/types.ts';
import type { PaymentProvider } from '../actors/billing/provider.ts';
import type { LocalPaymentProvider } from '../actors/billing/local/provider.ts';
import type { RenewalScheduler } from '../actors/billing/renewals.ts';
import type { SecretBox } from '../persistence/secret-box.ts';
import type { ClusterRouting } from '../runtime/cluster/routing.ts';
import type { Metrics } from '../runtime/metrics/index.ts';
import type { LiveEvents } from '../runtime/live-events.ts';
import type { Breakers } from '../providers/routing/breaker-store.ts';

export type Engine = 'uws-native' | 'uws-fallback';

/**
 * The one bag of resources built at start-up from configuration (app/service.ts); nothing below reads the
 * environment. Declared here because the routes are its readers, and http may not import app/.
 */
export interface Services {
  config: Config;
  /**
   * The service's public base URL: BASE_URL, or the address it listens on. With PORT=0 and no BASE_URL
   * the port is known only once listening; startService fills it in then.
   */
  publicUrl: string;
  version: string;
  engine: Engine;
  clock: Clock;
  logger: Logger;
  tracer: Tracer;
  /** The service's metrics (runtime/metrics/index.ts); undefined when OTEL_METRICS_EXPORTER=none. */
  metrics?: Metrics;
  db: Database;
  writer: GroupCommitWriter;
  actors: ServiceActorDirectory;
  health: HealthState;
  /** Cluster mode only: where each workspace is served, and the signature of requests forwarded between nodes. */
  cluster?: ClusterRouting;
  /** Set when REDIS_URL is; shared counters and cache invalidations go through it. */
  redis: RedisClient | undefined;
  /** Per-key rate limits and login throttling; in memory, or in Redis when REDIS_URL is set. */
  limiter: RateLimiter;
  /** Sign-in attempts per account and address (login throttling); in memory, or in Redis when REDIS_URL is set. */
  loginAttempts: AttemptStore;
  /** API key records by hash; call keyCache.invalidate(hash) after changing a key. */
  keyCache: KeyCache;
  /** Per-key request counts and lastUsedAt, written in batches off the request path. */
  keyUsage: KeyUsageRecorder;
  /** Asset bytes: local disk or S3-compatible storage (persistence/blob-store/types.ts). */
  blobs: BlobStore;
  /** Operator switches (the emergency stop), refreshed from the database every 2 s; read synchronously. */
  switches: ServiceSwitches;
  /** The catalog served now (plans, models, prices, deployments); read it once per request, it may be replaced between two. */
  readonly catalog: ModelCatalog;
  /** Where the catalog comes from, and its reloads. */
  catalogSource: CatalogSource;
  /** Circuit breakers of the provider deployments (docs/routing.md): the router asks and records; GET /v1/breakers reads. */
  breakers: Breakers;
  /** The providers jobs run on (inbound provider events are checked by their deployment's). */
  providers: ProviderRegistry;
  /** The payment provider; `local` is set when it is the built-in one (its pages are routes of this service). */
  billing: { provider: PaymentProvider; local: LocalPaymentProvider | undefined; renewals: RenewalScheduler };
  /** Seals webhook endpoints' signing secrets at rest (key: WEBHOOK_SECRET_KEY or generated under DATA_DIR). */
  webhookSecrets: SecretBox;
  /** Generation transitions for the live streams, in process or through Redis pub/sub (runtime/live-events.ts). */
  live: LiveEvents;
}

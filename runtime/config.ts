import os from 'node:os';
import path from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { REQUESTS_PER_MINUTE_ENV } from '../domain/plans.ts';
import { productionSecretProblems } from './production-secrets.ts';

/** Everything the service reads from its environment, validated once at start-up. */
export interface Config {
  port: number;
  host: string;
  baseUrl: string;
  /** `postgres://…` selects Postgres; `memory://` an in-memory PGlite; unset, PGlite under dataDir. */
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  dataDir: string;
  /** MIGRATE_AT_START (default true): a start applies the missing migrations; false, it refuses a database that lacks one (the migrate step's job: npm run migrate). */
  migrateAtStart: boolean;
  logLevel: LogLevel;
  bodyLimitBytes: number;
  allowUwsFallback: boolean;
  shutdownTimeoutMs: number;
  actorIdleMs: number;
  groupCommit: { windowMs: number; maxBatch: number };
  telemetry: TelemetryConfig;
  /** Metrics: the Prometheus scrape endpoint and the OTLP export (runtime/metrics/index.ts, docs/observability.md). */
  metrics: MetricsConfig;
  /** ACCESS_LOG: one `info` line per request answered (default true). */
  accessLog: boolean;
  /** Prefix of every Redis key and channel, so several services (or test runs) can share one Redis. */
  redisKeyPrefix: string;
  /** Origins besides baseUrl's that may make cookie-authenticated writes (ALLOWED_ORIGINS, comma-separated). */
  allowedOrigins: string[];
  sessionTtlHours: number;
  /** Requests per minute per API key for the plans whose RATE_LIMIT_<PLAN> is set; the catalog's plans say the rest. */
  rateLimitOverrides: Record<string, number>;
  /** The catalog file (CATALOG_FILE; default the shipped catalog/default.yaml) and how often it is looked at besides file events (CATALOG_POLL_MS). */
  catalog: { file: string; pollMs: number };
  /** Where asset bytes live: files under dataDir (default), or an S3-compatible bucket when S3_BUCKET is set. */
  blobStore: BlobStoreConfig;
  /** ALLOW_PRIVATE_EGRESS: fetched URLs may reach loopback and private addresses (development and tests only). */
  allowPrivateEgress: boolean;
  /**
   * LOOPBACK_EGRESS (auto, true, false): fetched URLs and webhook receivers may be loopback addresses, the
   * development mode. `auto`, the default, turns it on only for a service that can be reached from this
   * machine alone and says so: bound to a loopback HOST, with no public BASE_URL, and NODE_ENV not production.
   */
  allowLoopbackEgress: boolean;
  /** Generations: queue time-out, and the built-in local provider's latency and simulated failure rate. */
  generations: { queueTimeoutMs: number; localLatencyMs: number; localFailureRate: number; localMaxConcurrentJobs: number | undefined };
  /** Billing: the payment provider (`local`, built in) and the secret its events and pages are signed with (BILLING_SIGNING_SECRET; unset, one is generated and kept under dataDir). */
  billing: { provider: 'local'; signingSecret: string | undefined };
  /**
   * Webhooks: secretKey (WEBHOOK_SECRET_KEY) seals the endpoints' signing secrets at rest; unset, one is
   * generated and kept under dataDir. timeoutMs (WEBHOOK_TIMEOUT_MS) bounds each delivery attempt.
   * autoDisable: an endpoint whose attempts all failed for afterMs (WEBHOOK_DISABLE_AFTER_MS, default 5 days,
   * 0 never) or whose last afterExpired deliveries expired (WEBHOOK_DISABLE_AFTER_EXPIRED, default 0: never) is disabled.
   */
  webhooks: { secretKey: string | undefined; timeoutMs: number; autoDisable: { afterMs: number; afterExpired: number } };
  /**
   * Live streams (docs/streaming.md): pingMs (STREAM_PING_MS), how often an idle stream gets a comment or a
   * ping; maxBufferBytes (STREAM_MAX_BUFFER_BYTES), the events that may wait for a slow reader before it is cut off.
   */
  streams: { pingMs: number; maxBufferBytes: number };
  /**
   * The OpenAI-compatible door (docs/openai-compatible.md): `drainsPerNode` (OPENAI_DRAINS_PER_NODE), the jobs
   * a node keeps reading from their provider after their client went away, until their usage arrives; past
   * it, a job whose client left is cancelled and charged for what it streamed.
   */
  door: { drainsPerNode: number };
  /**
   * What every provider adapter is given (docs/providers.md): jobTimeoutMs (PROVIDER_JOB_TIMEOUT_MS), a job's
   * time at its provider, its deadline; pollMs (PROVIDER_POLL_MS), the polling backstop's interval;
   * requestTimeoutMs (PROVIDER_REQUEST_TIMEOUT_MS), each call's bound; maxResponseBytes and maxOutputBytes
   * (PROVIDER_MAX_RESPONSE_BYTES, PROVIDER_MAX_OUTPUT_BYTES), the largest answer and output file accepted.
   * Each kind's own settings (keys, base URLs, webhook secrets) are read by its adapter from `env`.
   */
  providers: { jobTimeoutMs: number; pollMs: number; requestTimeoutMs: number; maxResponseBytes: number; maxOutputBytes: number; breakerWaitMs: number };
  /** The environment the configuration was read from (the provider kinds read their own settings from it). */
  env: Readonly<Record<string, string | undefined>>;
  /** Cluster mode (CLUSTER=true, PostgreSQL and Redis only); undefined for a single node. */
  cluster: ClusterConfig | undefined;
}

/** Tracing: the OTEL_* settings the service reads (docs/observability.md), each validated. */
export interface TelemetryConfig {
  tracesExporter: 'none' | 'otlp' | 'console';
  /** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces (as it is over grpc); undefined: the exporter's default. */
  otlpEndpoint: string | undefined;
  /** OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: http/protobuf (the specification's default), http/json or grpc. */
  otlpProtocol: OtlpProtocol;
  /** OTEL_EXPORTER_OTLP_(TRACES_)HEADERS: `name=value` pairs, comma-separated, values percent-decoded. */
  otlpHeaders: Record<string, string>;
  serviceName: string;
  /** OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (the ratio of the traceidratio samplers, 0 to 1). */
  sampler: { name: TraceSampler; ratio: number };
}

export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** One node of a cluster: its identity, where the others reach it, and the membership and lease timings. */
export interface ClusterConfig {
  /** CLUSTER_NODE_ID; default `<hostname>:<PORT>`. Stable across restarts, unique in the cluster. */
  nodeId: string;
  /** CLUSTER_INTERNAL_ADDRESS:CLUSTER_INTERNAL_PORT, the node-to-node channel (default `<hostname>:8081`). */
  internalAddress: string;
  internalPort: number;
  heartbeatMs: number;
  deadAfterMs: number;
  leaseMs: number;
  /** CLUSTER_SHARDS: workspaces are spread over this many shards; the same on every node. */
  shards: number;
  /** CLUSTER_SECRET: the same on every node; authenticates requests forwarded between nodes (at least 32 characters). */
  secret: string;
}

/** Where metrics go: none, or a Prometheus endpoint on its own listener and/or OTLP pushes. */
export interface MetricsConfig {
  /** OTEL_METRICS_EXPORTER: `prometheus` (default), `otlp`, both (comma-separated), or `none`. */
  exporters: Array<'prometheus' | 'otlp'>;
  /** METRICS_HOST, METRICS_PORT: the listener of `GET /metrics`, apart from the API's port (default HOST, 9464). */
  host: string;
  port: number;
  /**
   * OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (a full URL), or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/metrics (as it is over grpc);
   * undefined: the exporter's default.
   */
  otlpEndpoint: string | undefined;
  /** OTEL_EXPORTER_OTLP_METRICS_PROTOCOL (or OTEL_EXPORTER_OTLP_PROTOCOL): http/protobuf (default), http/json or grpc. */
  otlpProtocol: OtlpProtocol;
  /** OTEL_EXPORTER_OTLP_METRICS_HEADERS (or OTEL_EXPORTER_OTLP_HEADERS), read as the traces' are. */
  otlpHeaders: Record<string, string>;
  /** OTEL_METRIC_EXPORT_INTERVAL and OTEL_METRIC_EXPORT_TIMEOUT, in milliseconds. */
  exportIntervalMs: number;
  exportTimeoutMs: number;
}

const METRICS_EXPORTERS = ['none', 'prometheus', 'otlp'] as const;

const CLUSTER_SETTINGS = [
  'CLUSTER_NODE_ID',
  'CLUSTER_INTERNAL_ADDRESS',
  'CLUSTER_INTERNAL_PORT',
  'CLUSTER_HEARTBEAT_MS',
  'CLUSTER_DEAD_AFTER_MS',
  'CLUSTER_LEASE_MS',
  'CLUSTER_SHARDS',
  'CLUSTER_SECRET',
] as const;

export type BlobStoreConfig =
  /** signingSecret: BLOB_SIGNING_SECRET; unset, one is generated and kept under dataDir. */
  | { kind: 'local'; signingSecret: string | undefined }
  | {
      kind: 's3';
      bucket: string;
      endpoint: string | undefined;
      region: string;
      accessKeyId: string | undefined;
      secretAccessKey: string | undefined;
      forcePathStyle: boolean;
    };

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/**
 * The settings of the migrate-only mode (app/migrate.ts): the database alone, so that a migrate step may run
 * with the nodes' whole Secret (CLUSTER_SECRET and the like) without the rest of a node's settings.
 */
export function loadDatabaseSettings(env: Env = process.env): Pick<Config, 'databaseUrl' | 'dataDir'> {
  const problems: string[] = [];
  const read = new EnvReader(env, problems);
  const databaseUrl = read.optionalUrl('DATABASE_URL', ['postgres:', 'postgresql:', 'memory:']);
  const dataDir = path.resolve(read.string('DATA_DIR', '.data'));
  if (problems.length > 0) throw new ConfigError(problems);
  return { databaseUrl, dataDir };
}

/** Reads and validates the configuration; every bad value is reported, not just the first. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const read = new EnvReader(env, problems);

  const port = read.integer('PORT', 8080, 0, 65535);
  const host = read.string('HOST', '127.0.0.1');
  const displayHost = host === '0.0.0.0' || host === '::' ? 'localhost' : host;
  const baseUrl = read.url('BASE_URL', `http://${displayHost.includes(':') ? `[${displayHost}]` : displayHost}:${port}`, ['http:', 'https:']);
  const databaseUrl = read.optionalUrl('DATABASE_URL', ['postgres:', 'postgresql:', 'memory:']);
  const redisUrl = read.optionalUrl('REDIS_URL', ['redis:', 'rediss:']);
  const dataDir = path.resolve(read.string('DATA_DIR', '.data'));
  const migrateAtStart = read.boolean('MIGRATE_AT_START', true);
  const logLevel = read.oneOf('LOG_LEVEL', LOG_LEVELS, 'info');
  const bodyLimitBytes = read.integer('BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024);
  const allowUwsFallback = read.boolean('ALLOW_UWS_FALLBACK', false);
  const shutdownTimeoutMs = read.integer('SHUTDOWN_TIMEOUT_MS', 15_000, 100, 600_000);
  const actorIdleMs = read.integer('ACTOR_IDLE_MS', 60_000, 10, 86_400_000);
  const windowMs = read.integer('GROUP_COMMIT_WINDOW_MS', 0, 0, 1000);
  const maxBatch = read.integer('GROUP_COMMIT_MAX_BATCH', 512, 1, 100_000);
  const telemetry = readTelemetry(read, env, problems);
  const accessLog = read.boolean('ACCESS_LOG', true);
  const metrics = readMetrics(read, env, problems, host);
  const redisKeyPrefix = read.string('REDIS_KEY_PREFIX', 'gs:');
  const allowedOrigins = read.origins('ALLOWED_ORIGINS');
  const sessionTtlHours = read.integer('SESSION_TTL_HOURS', 14 * 24, 1, 24 * 365);
  const rateLimitOverrides: Record<string, number> = {};
  for (const [plan, name] of Object.entries(REQUESTS_PER_MINUTE_ENV)) {
    if (env[name] !== undefined) rateLimitOverrides[plan] = read.integer(name, 1, 1, 1_000_000);
  }
  const catalogFile = path.resolve(read.string('CATALOG_FILE', shippedCatalogFile()));
  if (env.CATALOG_FILE !== undefined && !existsSync(catalogFile)) problems.push(`CATALOG_FILE: no file at ${catalogFile}`);
  const catalog = { file: catalogFile, pollMs: read.integer('CATALOG_POLL_MS', 1_000, 50, 3_600_000) };

  const blobStore = readBlobStore(read, env, problems);
  const allowPrivateEgress = read.boolean('ALLOW_PRIVATE_EGRESS', false);
  const loopbackEgress = read.oneOf('LOOPBACK_EGRESS', ['auto', 'true', 'false'] as const, 'auto');
  const allowLoopbackEgress =
    loopbackEgress === 'auto' ? isLoopbackHost(host) && isLoopbackHost(hostOf(baseUrl)) && env.NODE_ENV !== 'production' : loopbackEgress === 'true';
  const queueTimeoutMs = read.integer('QUEUE_TIMEOUT_MS', 10 * 60_000, 1_000, 7 * 24 * 3_600_000);
  const localLatencyMs = read.integer('LOCAL_PROVIDER_LATENCY_MS', 200, 0, 600_000);
  const localFailurePercent = read.integer('LOCAL_PROVIDER_FAILURE_PERCENT', 0, 0, 100);
  const paymentProvider = read.oneOf('PAYMENT_PROVIDER', ['local'] as const, 'local');
  const billingSecret = read.optionalString('BILLING_SIGNING_SECRET');
  if (billingSecret !== undefined && billingSecret.length < 32) problems.push('BILLING_SIGNING_SECRET: must be at least 32 characters');
  const localMaxConcurrentJobs = read.integer('LOCAL_PROVIDER_MAX_CONCURRENT_JOBS', 0, 0, 1_000_000);
  const providers = {
    jobTimeoutMs: read.integer('PROVIDER_JOB_TIMEOUT_MS', 30 * 60_000, 1_000, 7 * 24 * 3_600_000),
    pollMs: read.integer('PROVIDER_POLL_MS', 2_000, 10, 600_000),
    requestTimeoutMs: read.integer('PROVIDER_REQUEST_TIMEOUT_MS', 120_000, 100, 3_600_000),
    maxResponseBytes: read.integer('PROVIDER_MAX_RESPONSE_BYTES', 64 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxOutputBytes: read.integer('PROVIDER_MAX_OUTPUT_BYTES', 512 * 1024 * 1024, 1024, 8 * 1024 * 1024 * 1024),
    // How long a job waits for an open breaker of every deployment it can run on before it fails (docs/routing.md).
    breakerWaitMs: read.integer('PROVIDER_BREAKER_WAIT_MS', 10 * 60_000, 1_000, 7 * 24 * 3_600_000),
  };
  const webhookSecretKey = read.optionalString('WEBHOOK_SECRET_KEY');
  if (webhookSecretKey !== undefined && webhookSecretKey.length < 32) problems.push('WEBHOOK_SECRET_KEY: must be at least 32 characters');
  const webhookTimeoutMs = read.integer('WEBHOOK_TIMEOUT_MS', 10_000, 10, 60_000);
  const streamPingMs = read.integer('STREAM_PING_MS', 15_000, 100, 600_000);
  const streamMaxBufferBytes = read.integer('STREAM_MAX_BUFFER_BYTES', 1024 * 1024, 1024, 256 * 1024 * 1024);
  const drainsPerNode = read.integer('OPENAI_DRAINS_PER_NODE', 64, 0, 100_000);
  const webhookDisableAfterMs = read.integer('WEBHOOK_DISABLE_AFTER_MS', 5 * 24 * 3_600_000, 0, 365 * 24 * 3_600_000);
  const webhookDisableAfterExpired = read.integer('WEBHOOK_DISABLE_AFTER_EXPIRED', 0, 0, 1_000_000);
  const cluster = readCluster(read, env, problems, { port, databaseUrl, redisUrl });
  // NODE_ENV=production: no placeholder, short or low-entropy secret (runtime/production-secrets.ts).
  problems.push(...productionSecretProblems(env));

  // A setting read for traces and metrics both (OTEL_EXPORTER_OTLP_ENDPOINT…) is reported once.
  if (problems.length > 0) throw new ConfigError([...new Set(problems)]);
  return {
    port,
    host,
    baseUrl: baseUrl.replace(/\/$/, ''),
    databaseUrl,
    redisUrl,
    dataDir,
    migrateAtStart,
    logLevel,
    bodyLimitBytes,
    allowUwsFallback,
    shutdownTimeoutMs,
    actorIdleMs,
    groupCommit: { windowMs, maxBatch },
    telemetry,
    metrics,
    accessLog,
    redisKeyPrefix,
    allowedOrigins,
    sessionTtlHours,
    rateLimitOverrides,
    catalog,
    blobStore,
    allowPrivateEgress,
    allowLoopbackEgress,
    generations: { queueTimeoutMs, localLatencyMs, localFailureRate: localFailurePercent / 100, localMaxConcurrentJobs: localMaxConcurrentJobs || undefined },
    billing: { provider: paymentProvider, signingSecret: billingSecret },
    providers,
    env: { ...env },
    webhooks: {
      secretKey: webhookSecretKey,
      timeoutMs: webhookTimeoutMs,
      autoDisable: { afterMs: webhookDisableAfterMs, afterExpired: webhookDisableAfterExpired },
    },
    streams: { pingMs: streamPingMs, maxBufferBytes: streamMaxBufferBytes },
    door: { drainsPerNode },
    cluster,
  };
}

/**
 * Metrics settings. OTEL_METRICS_EXPORTER is a comma-separated list; unset, the Prometheus endpoint is on,
 * and OTLP too when OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set. The OTLP settings are read only when OTLP is on.
 */
function readMetrics(read: EnvReader, env: Env, problems: string[], host: string): MetricsConfig {
  const listed = read.optionalString('OTEL_METRICS_EXPORTER');
  let exporters: MetricsConfig['exporters'] = env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT?.trim() ? ['prometheus', 'otlp'] : ['prometheus'];
  if (listed !== undefined) {
    const names = listed
      .split(',')
      .map((name) => name.trim())
      .filter(Boolean);
    const unknown = names.filter((name) => !(METRICS_EXPORTERS as readonly string[]).includes(name));
    if (unknown.length > 0) problems.push(`OTEL_METRICS_EXPORTER=${JSON.stringify(listed)}: expected none, or prometheus and/or otlp (comma-separated)`);
    else if (names.length === 0 || (names.includes('none') && names.length > 1))
      problems.push(`OTEL_METRICS_EXPORTER=${JSON.stringify(listed)}: none cannot be combined with another exporter`);
    else exporters = names.includes('none') ? [] : [...new Set(names as MetricsConfig['exporters'])];
  }
  const metricsHost = read.string('METRICS_HOST', host);
  if (!/^[A-Za-z0-9.:[\]-]{1,253}$/.test(metricsHost)) problems.push(`METRICS_HOST=${JSON.stringify(metricsHost)}: expected a host name or IP address`);
  const port = read.integer('METRICS_PORT', 9464, 0, 65535);
  const otlp = exporters.includes('otlp');
  const signalEndpoint = otlp ? read.optionalUrl('OTEL_EXPORTER_OTLP_METRICS_ENDPOINT', ['http:', 'https:']) : undefined;
  const baseEndpoint = otlp && signalEndpoint === undefined ? read.optionalUrl('OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']) : undefined;
  let otlpProtocol: OtlpProtocol = 'http/protobuf';
  let otlpHeaders: Record<string, string> = {};
  if (otlp) {
    const own = read.optionalString('OTEL_EXPORTER_OTLP_METRICS_PROTOCOL');
    const shared = read.optionalString('OTEL_EXPORTER_OTLP_PROTOCOL');
    const [name, value] = own !== undefined ? ['OTEL_EXPORTER_OTLP_METRICS_PROTOCOL', own] : ['OTEL_EXPORTER_OTLP_PROTOCOL', shared];
    // The shared setting, when traces read it too, is refused once, by readTelemetry.
    const reportedByTraces = own === undefined && !env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim();
    if (value !== undefined) {
      if ((OTLP_PROTOCOLS as readonly string[]).includes(value)) otlpProtocol = value as OtlpProtocol;
      else if (!reportedByTraces) problems.push(`${name}=${JSON.stringify(value)}: metrics are exported over http/protobuf, http/json or grpc only`);
    }
    const headersName = env.OTEL_EXPORTER_OTLP_METRICS_HEADERS?.trim() ? 'OTEL_EXPORTER_OTLP_METRICS_HEADERS' : 'OTEL_EXPORTER_OTLP_HEADERS';
    otlpHeaders = parseOtlpHeaders(headersName, read.optionalString(headersName), problems);
    if (otlpProtocol === 'grpc') {
      const endpointName = signalEndpoint !== undefined ? 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
      checkGrpc(read, problems, 'METRICS', { name: endpointName, url: signalEndpoint ?? baseEndpoint }, { name: headersName, headers: otlpHeaders });
    }
  }
  const exportIntervalMs = read.integer('OTEL_METRIC_EXPORT_INTERVAL', 60_000, 100, 86_400_000);
  // The timeout defaults to 30 s, or the interval when that is shorter; one given longer than the interval is refused.
  const exportTimeoutMs = read.integer('OTEL_METRIC_EXPORT_TIMEOUT', Math.min(30_000, exportIntervalMs), 100, 600_000);
  if (otlp && exportTimeoutMs > exportIntervalMs)
    problems.push(`OTEL_METRIC_EXPORT_TIMEOUT=${exportTimeoutMs}: must not exceed OTEL_METRIC_EXPORT_INTERVAL (${exportIntervalMs})`);
  // Over HTTP the shared endpoint is a base the signal's path is appended to; over gRPC it is used as it is.
  const otlpEndpoint =
    signalEndpoint ?? (baseEndpoint === undefined || otlpProtocol === 'grpc' ? baseEndpoint : `${baseEndpoint.replace(/\/+$/, '')}/v1/metrics`);
  return { exporters, host: metricsHost, port, otlpEndpoint, otlpProtocol, otlpHeaders, exportIntervalMs, exportTimeoutMs };
}

/**
 * The OTEL_* variables the service reads. Each is checked like any other setting: a protocol, sampler or
 * value the service does not support stops start-up with its message instead of being ignored. The SDK
 * reads no OTEL_* variable of its own beyond these: the service hands it every setting.
 */
function readTelemetry(read: EnvReader, env: Env, problems: string[]): TelemetryConfig {
  const endpointSet = Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
  const sdkDisabled = read.boolean('OTEL_SDK_DISABLED', false);
  const tracesExporter = sdkDisabled ? 'none' : read.oneOf('OTEL_TRACES_EXPORTER', ['none', 'otlp', 'console'] as const, endpointSet ? 'otlp' : 'none');
  const signalEndpoint = read.optionalUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', ['http:', 'https:']);
  const baseEndpoint = read.optionalUrl('OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']);
  const protocolName = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const otlpProtocol = read.oneOf(protocolName, OTLP_PROTOCOLS, 'http/protobuf');
  // The per-signal endpoint is used as it is; the shared one is a base, to which OTLP/HTTP appends the signal's path.
  const otlpEndpoint =
    signalEndpoint ??
    (baseEndpoint === undefined || otlpProtocol === 'grpc' || baseEndpoint.endsWith('/v1/traces')
      ? baseEndpoint
      : `${baseEndpoint.replace(/\/+$/, '')}/v1/traces`);
  const headersName = env.OTEL_EXPORTER_OTLP_TRACES_HEADERS?.trim() ? 'OTEL_EXPORTER_OTLP_TRACES_HEADERS' : 'OTEL_EXPORTER_OTLP_HEADERS';
  const otlpHeaders = parseOtlpHeaders(headersName, read.optionalString(headersName), problems);
  if (otlpProtocol === 'grpc' && tracesExporter === 'otlp') {
    const endpointName = signalEndpoint !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
    checkGrpc(read, problems, 'TRACES', { name: endpointName, url: otlpEndpoint }, { name: headersName, headers: otlpHeaders });
  }
  const serviceName = read.string('OTEL_SERVICE_NAME', 'generation-service');
  const samplerName = read.oneOf('OTEL_TRACES_SAMPLER', TRACE_SAMPLERS, 'parentbased_always_on');
  const samplerArg = read.optionalString('OTEL_TRACES_SAMPLER_ARG');
  let ratio = 1;
  if (samplerArg !== undefined) {
    const value = Number(samplerArg);
    if (!/^\d*\.?\d+(?:e-?\d+)?$/i.test(samplerArg) || !(value >= 0 && value <= 1))
      problems.push(`OTEL_TRACES_SAMPLER_ARG=${JSON.stringify(samplerArg)}: expected a ratio from 0 to 1`);
    else if (!samplerName.endsWith('traceidratio'))
      problems.push(`OTEL_TRACES_SAMPLER_ARG: only the traceidratio samplers take an argument, not ${samplerName}`);
    else ratio = value;
  }
  // Read by the SDK itself (the batch processor, the exporter, the resource and propagator set-up): checked here.
  for (const name of SDK_INTEGER_SETTINGS) read.integer(name, 0, 0, 1_000_000_000);
  for (const name of ['OTEL_EXPORTER_OTLP_COMPRESSION', 'OTEL_EXPORTER_OTLP_TRACES_COMPRESSION']) read.oneOf(name, ['gzip', 'none'] as const, 'none');
  const propagators = read.optionalString('OTEL_PROPAGATORS');
  for (const item of propagators
    ?.split(',')
    .map((p) => p.trim())
    .filter(Boolean) ?? []) {
    if (!PROPAGATORS.includes(item)) problems.push(`OTEL_PROPAGATORS: ${JSON.stringify(item)} is not one of ${PROPAGATORS.join(', ')}`);
  }
  parseOtlpHeaders('OTEL_RESOURCE_ATTRIBUTES', read.optionalString('OTEL_RESOURCE_ATTRIBUTES'), problems, /^[^\s=,]+$/);
  return { tracesExporter, otlpEndpoint, otlpProtocol, otlpHeaders, serviceName, sampler: { name: samplerName, ratio } };
}

/**
 * What OTLP over gRPC asks beyond HTTP's settings. The endpoint is a scheme, host and port: a path would be
 * dropped by the exporter, so it is refused. TLS follows the scheme (http:// plaintext, https:// TLS), as the
 * specification says once a scheme is given; OTEL_EXPORTER_OTLP_INSECURE=true beside an https:// endpoint
 * contradicts it. Headers go as gRPC metadata, whose names and values are narrower than HTTP's.
 */
function checkGrpc(
  read: EnvReader,
  problems: string[],
  signal: 'TRACES' | 'METRICS',
  endpoint: { name: string; url: string | undefined },
  headers: { name: string; headers: Record<string, string> },
): void {
  const pathname = endpoint.url === undefined ? '/' : new URL(endpoint.url).pathname;
  if (pathname !== '/' && pathname !== '')
    problems.push(`${endpoint.name}: over grpc the endpoint is a scheme, host and port only, without a path (${JSON.stringify(pathname)})`);
  const insecureName =
    read.optionalString(`OTEL_EXPORTER_OTLP_${signal}_INSECURE`) !== undefined ? `OTEL_EXPORTER_OTLP_${signal}_INSECURE` : 'OTEL_EXPORTER_OTLP_INSECURE';
  if (read.boolean(insecureName, false) && endpoint.url?.startsWith('https:')) {
    problems.push(`${insecureName}=true: ${endpoint.name} asks for TLS with its https:// scheme; give an http:// URL for a plaintext connection`);
  }
  for (const [key, value] of Object.entries(headers.headers)) {
    // The value is not repeated: a credential, often.
    if (!/^[0-9a-z_.-]+$/.test(key) || key.endsWith('-bin') || !/^[\x20-\x7e]*$/.test(value)) {
      problems.push(
        `${headers.name}: over grpc a header name is made of a-z, 0-9, '-', '_' and '.' (not ending in -bin) and its value of printable ASCII; ${JSON.stringify(key)} is not`,
      );
    }
  }
}

const SDK_INTEGER_SETTINGS = [
  'OTEL_BSP_SCHEDULE_DELAY',
  'OTEL_BSP_EXPORT_TIMEOUT',
  'OTEL_BSP_MAX_QUEUE_SIZE',
  'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
  'OTEL_EXPORTER_OTLP_TIMEOUT',
  'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
  'OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT',
  'OTEL_ATTRIBUTE_COUNT_LIMIT',
  'OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT',
  'OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT',
  'OTEL_SPAN_EVENT_COUNT_LIMIT',
  'OTEL_SPAN_LINK_COUNT_LIMIT',
];
const PROPAGATORS = ['tracecontext', 'baggage', 'b3', 'b3multi', 'jaeger', 'none'];

/** `api-key=secret,x-tenant=a%20b`: header names are tokens; values are percent-decoded (W3C baggage format). */
function parseOtlpHeaders(name: string, value: string | undefined, problems: string[], keyPattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/): Record<string, string> {
  const headers: Record<string, string> = {};
  if (value === undefined) return headers;
  for (const pair of value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = pair.indexOf('=');
    const key = at > 0 ? pair.slice(0, at).trim() : '';
    let decoded: string | undefined;
    try {
      decoded = at > 0 ? decodeURIComponent(pair.slice(at + 1).trim()) : undefined;
    } catch {
      decoded = undefined;
    }
    // The pair itself is not repeated: its value is a credential, often.
    if (!keyPattern.test(key) || decoded === undefined || /[\r\n]/.test(decoded)) {
      problems.push(`${name}: expected name=value pairs separated by commas (pair ${headersPairIndex(value, pair)} is not one)`);
      continue;
    }
    headers[key.toLowerCase()] = decoded;
  }
  return headers;
}

function headersPairIndex(all: string, pair: string): number {
  return (
    all
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)
      .indexOf(pair) + 1
  );
}

/**
 * CLUSTER=true and its settings. A cluster shares one PostgreSQL database and one Redis, so PGlite (which
 * one process owns) refuses any cluster setting, as does a setting given without CLUSTER=true.
 */
function readCluster(
  read: EnvReader,
  env: Env,
  problems: string[],
  base: { port: number; databaseUrl: string | undefined; redisUrl: string | undefined },
): ClusterConfig | undefined {
  const enabled = read.boolean('CLUSTER', false);
  const given = CLUSTER_SETTINGS.filter((name) => env[name] !== undefined && env[name]!.trim() !== '');
  const onPostgres = base.databaseUrl?.startsWith('postgres') ?? false;
  if (!onPostgres && (enabled || given.length > 0)) {
    problems.push(`${enabled ? 'CLUSTER=true' : given.join(', ')}: cluster mode needs PostgreSQL (DATABASE_URL=postgres://…); PGlite runs a single node only`);
    return undefined;
  }
  if (!enabled) {
    if (given.length > 0) problems.push(`${given.join(', ')}: only read in cluster mode; set CLUSTER=true, or unset them`);
    return undefined;
  }
  if (base.redisUrl === undefined) problems.push('CLUSTER=true: cluster mode needs REDIS_URL (rate limits, idempotency and shared state across nodes)');

  const nodeId = read.string('CLUSTER_NODE_ID', `${os.hostname()}:${base.port}`);
  if (!/^[A-Za-z0-9._:-]{1,128}$/.test(nodeId))
    problems.push(`CLUSTER_NODE_ID=${JSON.stringify(nodeId)}: expected 1 to 128 letters, digits, '.', '_', ':' or '-'`);
  const internalAddress = read.string('CLUSTER_INTERNAL_ADDRESS', os.hostname());
  if (!/^[A-Za-z0-9.:[\]-]{1,253}$/.test(internalAddress))
    problems.push(`CLUSTER_INTERNAL_ADDRESS=${JSON.stringify(internalAddress)}: expected a host name or IP address`);
  const internalPort = read.integer('CLUSTER_INTERNAL_PORT', 8081, 1, 65535);
  const heartbeatMs = read.integer('CLUSTER_HEARTBEAT_MS', 1000, 50, 60_000);
  const deadAfterMs = read.integer('CLUSTER_DEAD_AFTER_MS', 5000, 100, 600_000);
  const leaseMs = read.integer('CLUSTER_LEASE_MS', deadAfterMs, 100, 600_000);
  const shards = read.integer('CLUSTER_SHARDS', 64, 1, 4096);
  if (deadAfterMs < 2 * heartbeatMs)
    problems.push(
      `CLUSTER_DEAD_AFTER_MS=${deadAfterMs}: must be at least twice CLUSTER_HEARTBEAT_MS (${heartbeatMs}), so one late heartbeat does not kill a node`,
    );
  if (leaseMs < 2 * heartbeatMs)
    problems.push(`CLUSTER_LEASE_MS=${leaseMs}: must be at least twice CLUSTER_HEARTBEAT_MS (${heartbeatMs}), so a lease outlives one missed renewal`);
  // Secrets a node would otherwise generate under its own DATA_DIR: every node must read what another sealed or signed.
  const shared = ['WEBHOOK_SECRET_KEY', 'BILLING_SIGNING_SECRET', ...(env.S3_BUCKET?.trim() ? [] : ['BLOB_SIGNING_SECRET'])];
  const missing = shared.filter((name) => !env[name]?.trim());
  if (missing.length > 0)
    problems.push(
      `${missing.join(', ')}: required in cluster mode, the same on every node (a node would otherwise generate its own under DATA_DIR, which the others cannot read)`,
    );
  const secret = read.optionalString('CLUSTER_SECRET') ?? '';
  if (secret.length < 32)
    problems.push(
      'CLUSTER_SECRET: required in cluster mode, at least 32 characters, the same on every node (it authenticates requests forwarded between nodes)',
    );
  return { nodeId, internalAddress, internalPort, heartbeatMs, deadAfterMs, leaseMs, shards, secret };
}

function readBlobStore(read: EnvReader, env: Env, problems: string[]): BlobStoreConfig {
  const bucket = read.optionalString('S3_BUCKET');
  if (bucket === undefined) {
    const signingSecret = read.optionalString('BLOB_SIGNING_SECRET');
    if (signingSecret !== undefined && signingSecret.length < 32) problems.push('BLOB_SIGNING_SECRET: must be at least 32 characters');
    return { kind: 'local', signingSecret };
  }
  const accessKeyId = read.optionalString('S3_ACCESS_KEY_ID');
  const secretAccessKey = read.optionalString('S3_SECRET_ACCESS_KEY');
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) problems.push('S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY: set both or neither');
  return {
    kind: 's3',
    bucket,
    endpoint: read.optionalUrl('S3_ENDPOINT', ['http:', 'https:']),
    region: read.string('S3_REGION', env.AWS_REGION?.trim() || 'us-east-1'),
    accessKeyId,
    secretAccessKey,
    forcePathStyle: read.boolean('S3_FORCE_PATH_STYLE', false),
  };
}

class EnvReader {
  constructor(
    private readonly env: Env,
    private readonly problems: string[],
  ) {}

  private raw(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  optionalString(name: string): string | undefined {
    return this.raw(name);
  }

  integer(name: string, fallback: number, min: number, max: number): number {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      this.problems.push(`${name}=${JSON.stringify(value)}: expected a whole number from ${min} to ${max}`);
      return fallback;
    }
    return Number(value);
  }

  boolean(name: string, fallback: boolean): boolean {
    const value = this.raw(name)?.toLowerCase();
    if (value === undefined) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(value)) return true;
    if (['0', 'false', 'no', 'off'].includes(value)) return false;
    this.problems.push(`${name}=${JSON.stringify(value)}: expected true or false`);
    return fallback;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (!(allowed as readonly string[]).includes(value)) {
      this.problems.push(`${name}=${JSON.stringify(value)}: expected one of ${allowed.join(', ')}`);
      return fallback;
    }
    return value as T;
  }

  url(name: string, fallback: string, protocols: string[]): string {
    return this.optionalUrl(name, protocols) ?? fallback;
  }

  /** A comma-separated list of http(s) URLs, kept as their origins. */
  origins(name: string): string[] {
    const value = this.raw(name);
    if (value === undefined) return [];
    const origins: string[] = [];
    for (const item of value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      try {
        const parsed = new URL(item);
        if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('not http');
        origins.push(parsed.origin);
      } catch {
        this.problems.push(`${name}: ${JSON.stringify(item)} is not an http(s) origin`);
      }
    }
    return origins;
  }

  optionalUrl(name: string, protocols: string[]): string | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    try {
      const parsed = new URL(value);
      if (!protocols.includes(parsed.protocol)) {
        this.problems.push(`${name}: expected a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);
        return undefined;
      }
      return value;
    } catch {
      this.problems.push(`${name}: not a valid URL`);
      return undefined;
    }
  }
}

/** For commands (`npm start`, `npm run ops`): the configuration, or every problem on stderr and exit status 78. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(78);
  }
}

/** Whether a host name or address can be reached from this machine only (localhost, 127.0.0.0/8, ::1). */
function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(bare) || bare === '::1';
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
}

/** The catalog shipped with the service: catalog/default.yaml at the repository's top (from the sources or a compiled build under dist/). */
export function shippedCatalogFile(): string {
  for (const relative of ['../catalog/default.yaml', '../../catalog/default.yaml']) {
    const file = fileURLToPath(new URL(relative, import.meta.url));
    if (existsSync(file)) return file;
  }
  return fileURLToPath(new URL('../catalog/default.yaml', import.meta.url));
}

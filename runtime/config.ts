import os from 'node:os';
import path from 'node:path';
import { DEFAULT_REQUESTS_PER_MINUTE, PLAN_IDS, REQUESTS_PER_MINUTE_ENV, type PlanId } from './plans.ts';

/** Everything the service reads from its environment, validated once at start-up. */
export interface Config {
  port: number;
  host: string;
  baseUrl: string;
  /** `postgres://…` selects Postgres; `memory://` an in-memory PGlite; unset, PGlite under dataDir. */
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  dataDir: string;
  logLevel: LogLevel;
  bodyLimitBytes: number;
  allowUwsFallback: boolean;
  shutdownTimeoutMs: number;
  actorIdleMs: number;
  groupCommit: { windowMs: number; maxBatch: number };
  telemetry: { tracesExporter: 'none' | 'otlp' | 'console'; otlpEndpoint: string | undefined; serviceName: string };
  /** Prefix of every Redis key and channel, so several services (or test runs) can share one Redis. */
  redisKeyPrefix: string;
  /** Origins besides baseUrl's that may make cookie-authenticated writes (ALLOWED_ORIGINS, comma-separated). */
  allowedOrigins: string[];
  sessionTtlHours: number;
  /** Requests per minute per API key, by plan. */
  rateLimits: Record<PlanId, number>;
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
  /** The OpenAI-compatible provider, when OPENAI_BASE_URL is set (its models are offered only then). */
  openai: OpenAiConfig | undefined;
  /** Cluster mode (CLUSTER=true, PostgreSQL and Redis only); undefined for a single node. */
  cluster: ClusterConfig | undefined;
}

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

const CLUSTER_SETTINGS = ['CLUSTER_NODE_ID', 'CLUSTER_INTERNAL_ADDRESS', 'CLUSTER_INTERNAL_PORT', 'CLUSTER_HEARTBEAT_MS',
  'CLUSTER_DEAD_AFTER_MS', 'CLUSTER_LEASE_MS', 'CLUSTER_SHARDS', 'CLUSTER_SECRET'] as const;

export interface OpenAiConfig {
  baseUrl: string;
  apiKey: string;
  chatModel: string;
  imageModel: string;
  timeoutMs: number;
  /** Jobs in flight at once on that server; undefined for no limit. */
  maxConcurrentJobs: number | undefined;
}

export type BlobStoreConfig =
  /** signingSecret: BLOB_SIGNING_SECRET; unset, one is generated and kept under dataDir. */
  | { kind: 'local'; signingSecret: string | undefined }
  | { kind: 's3'; bucket: string; endpoint: string | undefined; region: string; accessKeyId: string | undefined; secretAccessKey: string | undefined; forcePathStyle: boolean };

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

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
  const logLevel = read.oneOf('LOG_LEVEL', LOG_LEVELS, 'info');
  const bodyLimitBytes = read.integer('BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024);
  const allowUwsFallback = read.boolean('ALLOW_UWS_FALLBACK', false);
  const shutdownTimeoutMs = read.integer('SHUTDOWN_TIMEOUT_MS', 15_000, 100, 600_000);
  const actorIdleMs = read.integer('ACTOR_IDLE_MS', 60_000, 10, 86_400_000);
  const windowMs = read.integer('GROUP_COMMIT_WINDOW_MS', 0, 0, 1000);
  const maxBatch = read.integer('GROUP_COMMIT_MAX_BATCH', 512, 1, 100_000);
  const tracesExporter = read.oneOf('OTEL_TRACES_EXPORTER', ['none', 'otlp', 'console'] as const,
    env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? 'otlp' : 'none');
  const otlpEndpoint = read.optionalUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', ['http:', 'https:'])
    ?? read.optionalUrl('OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']);
  const serviceName = read.string('OTEL_SERVICE_NAME', 'generation-service');
  const redisKeyPrefix = read.string('REDIS_KEY_PREFIX', 'gs:');
  const allowedOrigins = read.origins('ALLOWED_ORIGINS');
  const sessionTtlHours = read.integer('SESSION_TTL_HOURS', 14 * 24, 1, 24 * 365);
  const rateLimits = Object.fromEntries(PLAN_IDS.map((plan) =>
    [plan, read.integer(REQUESTS_PER_MINUTE_ENV[plan], DEFAULT_REQUESTS_PER_MINUTE[plan], 1, 1_000_000)])) as Record<PlanId, number>;

  const blobStore = readBlobStore(read, env, problems);
  const allowPrivateEgress = read.boolean('ALLOW_PRIVATE_EGRESS', false);
  const loopbackEgress = read.oneOf('LOOPBACK_EGRESS', ['auto', 'true', 'false'] as const, 'auto');
  const allowLoopbackEgress = loopbackEgress === 'auto'
    ? isLoopbackHost(host) && isLoopbackHost(hostOf(baseUrl)) && env.NODE_ENV !== 'production'
    : loopbackEgress === 'true';
  const queueTimeoutMs = read.integer('QUEUE_TIMEOUT_MS', 10 * 60_000, 1_000, 7 * 24 * 3_600_000);
  const localLatencyMs = read.integer('LOCAL_PROVIDER_LATENCY_MS', 200, 0, 600_000);
  const localFailurePercent = read.integer('LOCAL_PROVIDER_FAILURE_PERCENT', 0, 0, 100);
  const paymentProvider = read.oneOf('PAYMENT_PROVIDER', ['local'] as const, 'local');
  const billingSecret = read.optionalString('BILLING_SIGNING_SECRET');
  if (billingSecret !== undefined && billingSecret.length < 32) problems.push('BILLING_SIGNING_SECRET: must be at least 32 characters');
  const localMaxConcurrentJobs = read.integer('LOCAL_PROVIDER_MAX_CONCURRENT_JOBS', 0, 0, 1_000_000);
  const openai = readOpenAi(read, problems);
  const webhookSecretKey = read.optionalString('WEBHOOK_SECRET_KEY');
  if (webhookSecretKey !== undefined && webhookSecretKey.length < 32) problems.push('WEBHOOK_SECRET_KEY: must be at least 32 characters');
  const webhookTimeoutMs = read.integer('WEBHOOK_TIMEOUT_MS', 10_000, 10, 60_000);
  const webhookDisableAfterMs = read.integer('WEBHOOK_DISABLE_AFTER_MS', 5 * 24 * 3_600_000, 0, 365 * 24 * 3_600_000);
  const webhookDisableAfterExpired = read.integer('WEBHOOK_DISABLE_AFTER_EXPIRED', 0, 0, 1_000_000);
  const cluster = readCluster(read, env, problems, { port, databaseUrl, redisUrl });

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    port, host, baseUrl: baseUrl.replace(/\/$/, ''), databaseUrl, redisUrl, dataDir, logLevel, bodyLimitBytes,
    allowUwsFallback, shutdownTimeoutMs, actorIdleMs, groupCommit: { windowMs, maxBatch },
    telemetry: { tracesExporter, otlpEndpoint, serviceName }, redisKeyPrefix, allowedOrigins, sessionTtlHours, rateLimits,
    blobStore, allowPrivateEgress, allowLoopbackEgress,
    generations: { queueTimeoutMs, localLatencyMs, localFailureRate: localFailurePercent / 100, localMaxConcurrentJobs: localMaxConcurrentJobs || undefined },
    billing: { provider: paymentProvider, signingSecret: billingSecret },
    openai,
    webhooks: { secretKey: webhookSecretKey, timeoutMs: webhookTimeoutMs, autoDisable: { afterMs: webhookDisableAfterMs, afterExpired: webhookDisableAfterExpired } },
    cluster,
  };
}

/**
 * CLUSTER=true and its settings. A cluster shares one PostgreSQL database and one Redis, so PGlite (which
 * one process owns) refuses any cluster setting, as does a setting given without CLUSTER=true.
 */
function readCluster(read: EnvReader, env: Env, problems: string[], base: { port: number; databaseUrl: string | undefined; redisUrl: string | undefined }): ClusterConfig | undefined {
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
  if (!/^[A-Za-z0-9._:-]{1,128}$/.test(nodeId)) problems.push(`CLUSTER_NODE_ID=${JSON.stringify(nodeId)}: expected 1 to 128 letters, digits, '.', '_', ':' or '-'`);
  const internalAddress = read.string('CLUSTER_INTERNAL_ADDRESS', os.hostname());
  if (!/^[A-Za-z0-9.:\[\]-]{1,253}$/.test(internalAddress)) problems.push(`CLUSTER_INTERNAL_ADDRESS=${JSON.stringify(internalAddress)}: expected a host name or IP address`);
  const internalPort = read.integer('CLUSTER_INTERNAL_PORT', 8081, 1, 65535);
  const heartbeatMs = read.integer('CLUSTER_HEARTBEAT_MS', 1000, 50, 60_000);
  const deadAfterMs = read.integer('CLUSTER_DEAD_AFTER_MS', 5000, 100, 600_000);
  const leaseMs = read.integer('CLUSTER_LEASE_MS', deadAfterMs, 100, 600_000);
  const shards = read.integer('CLUSTER_SHARDS', 64, 1, 4096);
  if (deadAfterMs < 2 * heartbeatMs) problems.push(`CLUSTER_DEAD_AFTER_MS=${deadAfterMs}: must be at least twice CLUSTER_HEARTBEAT_MS (${heartbeatMs}), so one late heartbeat does not kill a node`);
  if (leaseMs < 2 * heartbeatMs) problems.push(`CLUSTER_LEASE_MS=${leaseMs}: must be at least twice CLUSTER_HEARTBEAT_MS (${heartbeatMs}), so a lease outlives one missed renewal`);
  // Secrets a node would otherwise generate under its own DATA_DIR: every node must read what another sealed or signed.
  const shared = ['WEBHOOK_SECRET_KEY', 'BILLING_SIGNING_SECRET', ...(env.S3_BUCKET?.trim() ? [] : ['BLOB_SIGNING_SECRET'])];
  const missing = shared.filter((name) => !env[name]?.trim());
  if (missing.length > 0) problems.push(`${missing.join(', ')}: required in cluster mode, the same on every node (a node would otherwise generate its own under DATA_DIR, which the others cannot read)`);
  const secret = read.optionalString('CLUSTER_SECRET') ?? '';
  if (secret.length < 32) problems.push('CLUSTER_SECRET: required in cluster mode, at least 32 characters, the same on every node (it authenticates requests forwarded between nodes)');
  return { nodeId, internalAddress, internalPort, heartbeatMs, deadAfterMs, leaseMs, shards, secret };
}

function readOpenAi(read: EnvReader, problems: string[]): OpenAiConfig | undefined {
  const baseUrl = read.optionalUrl('OPENAI_BASE_URL', ['http:', 'https:']);
  const apiKey = read.optionalString('OPENAI_API_KEY');
  const chatModel = read.string('OPENAI_CHAT_MODEL', 'gpt-4o-mini');
  const imageModel = read.string('OPENAI_IMAGE_MODEL', 'dall-e-3');
  const timeoutMs = read.integer('OPENAI_TIMEOUT_MS', 120_000, 100, 3_600_000);
  const maxConcurrentJobs = read.integer('OPENAI_MAX_CONCURRENT_JOBS', 0, 0, 1_000_000);
  if (baseUrl === undefined) return undefined;
  if (apiKey === undefined) {
    problems.push('OPENAI_API_KEY: required when OPENAI_BASE_URL is set');
    return undefined;
  }
  return { baseUrl: baseUrl.replace(/\/+$/, ''), apiKey, chatModel, imageModel, timeoutMs, maxConcurrentJobs: maxConcurrentJobs || undefined };
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
  constructor(private readonly env: Env, private readonly problems: string[]) {}

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
    for (const item of value.split(',').map((s) => s.trim()).filter(Boolean)) {
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

import { randomBytes } from 'node:crypto';
import tap, { type Test } from 'tap';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { DestinationStream } from 'pino';
import { loadConfig, type Config } from '../../runtime/config.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { ActorBehavior } from '../../runtime/actor-behavior.ts';
import type { RecoveryTask } from '../../runtime/recovery.ts';
import { startService, type RunningService } from '../../app/service.ts';
import type { RouteDef } from '../../http/route.ts';
import { freshDatabaseUrl, migratedPglite } from './database.ts';

export interface TestServerOptions {
  env?: Record<string, string>;
  clock?: Clock;
  behaviors?: ActorBehavior<any, any, any>[];
  routes?: RouteDef[];
  recovery?: RecoveryTask[];
  spanExporter?: SpanExporter;
  /** Where log lines go (LOG_LEVEL from env, default silent in tests). */
  logDestination?: DestinationStream;
  /** Keep the database when the test ends (default: dropped). */
  databaseUrl?: string;
}

export interface TestServer extends RunningService {
  config: Config;
  /** fetch against the server, with a path. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  json<T = any>(path: string, init?: RequestInit): Promise<{ status: number; body: T; headers: Headers }>;
}

/** Starts the real service on a free port, on a fresh database, and stops it when the test ends. */
export async function startTestServer(t: Test, options: TestServerOptions = {}): Promise<TestServer> {
  const database = options.databaseUrl ? { url: options.databaseUrl, drop: async () => {} } : await freshDatabaseUrl();
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_URL: database.url,
    DATA_DIR: '.data/test',
    // The guard as in production; tests that need loopback receivers say ALLOW_PRIVATE_EGRESS or LOOPBACK_EGRESS.
    LOOPBACK_EGRESS: 'false',
    // The metrics listener on a free port of its own (the default, 9464, would be shared by parallel servers).
    METRICS_PORT: '0',
    // Each server its own Redis key space, so parallel test files (and earlier runs) never share counters.
    ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: `test:${randomBytes(6).toString('hex')}:` } : {}),
    ...options.env,
  });
  const service = await startService({
    config,
    clock: options.clock,
    behaviors: options.behaviors,
    routes: options.routes,
    recovery: options.recovery,
    spanExporter: options.spanExporter,
    logDestination: options.logDestination,
    pglite: config.databaseUrl === 'memory://' ? await migratedPglite() : undefined,
  });
  t.teardown(async () => {
    await service.stop();
    await database.drop();
  });
  const fetchPath = (path: string, init?: RequestInit) => fetch(`${service.url}${path}`, init);
  return {
    ...service,
    config,
    fetch: fetchPath,
    async json(path, init) {
      const response = await fetchPath(path, init);
      // A live stream (docs/streaming.md) does not end: its head is the answer; the stream is dropped.
      if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
        await response.body?.cancel();
        return { status: response.status, body: undefined as never, headers: response.headers };
      }
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
    },
  };
}

const shared = new Map<string, Promise<TestServer>>();

/**
 * One server for the whole file, started by the first test that asks and stopped when the file ends, for tests
 * that sign up their own users and workspaces and so never see each other's data: a start costs far more
 * than most tests. Servers with other `env` are others. A test that counts or changes something global
 * (every user, a clock, a switch) starts its own with startTestServer.
 */
export function sharedTestServer(env: Record<string, string> = {}): Promise<TestServer> {
  const key = JSON.stringify(Object.entries(env).sort());
  let server = shared.get(key);
  if (!server) {
    // Stopped when the file ends: in a group of files (test/groups/) the next file starts its own.
    tap.teardown(() => {
      shared.delete(key);
    });
    server = startTestServer(tap, { env });
    shared.set(key, server);
  }
  return server;
}

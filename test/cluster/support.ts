import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { eventually as pollUntil } from '../helpers/eventually.ts';
import { listLeases } from '../../persistence/cluster/index.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { startNode, type Child } from '../fixtures/child.ts';
import type { TestServer } from '../helpers/server.ts';
import { openDatabase, type Database } from '../../persistence/database.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { freePort } from '../helpers/ports.ts';

/** Cluster mode exists on PostgreSQL only (PGlite is one process's database); these tests need one. */
export const NEEDS_POSTGRES = process.env.TEST_DATABASE_URL ? false : 'cluster mode runs on PostgreSQL only: set TEST_DATABASE_URL';

/** A fresh PostgreSQL database, migrated, closed and dropped when t ends. */
export async function clusterDatabase(t: Test, poolMax = 20): Promise<Database & { url: string }> {
  const fresh = await freshDatabaseUrl();
  const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test', poolMax });
  t.teardown(async () => {
    await db.close();
    await fresh.drop();
  });
  return Object.assign(db, { url: fresh.url });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls check until it returns a value other than undefined, or fails after timeoutMs (a bound, not a measure). */
export function eventually<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000, everyMs = 50): Promise<T> {
  return pollUntil(check, { what, timeoutMs, everyMs }) as Promise<T>;
}

// ---- Real node processes (test/fixtures/serve.ts, the service as `npm start` runs it) ----

export const NEEDS_POSTGRES_REDIS =
  process.env.TEST_DATABASE_URL && process.env.TEST_REDIS_URL ? false : 'cluster mode needs PostgreSQL and Redis: set TEST_DATABASE_URL and TEST_REDIS_URL';

export interface Reply {
  status: number;
  body: any;
  headers: Headers;
}

/** One node process and a client over its public URL (the parts of TestServer the identity helpers use). */
export interface NodeProcess {
  id: string;
  child: Child;
  url: string;
  client: TestServer;
}

export function clientOf(url: string): TestServer {
  return {
    url,
    async json(p: string, init?: RequestInit): Promise<Reply> {
      const response = await fetch(`${url}${p}`, init);
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
    },
  } as unknown as TestServer;
}

/**
 * Sends through `node`, and again after Retry-After while the workspace is between nodes (503), as a client
 * should: under load a lease renewal can be late and a shard move briefly, which is an answer, not a failure.
 */
export async function sendRetryingMoves(node: NodeProcess, p: string, init: RequestInit, attempts = 10): Promise<Reply> {
  for (let attempt = 0; ; attempt++) {
    const reply = await node.client.json(p, init);
    if (reply.status !== 503 || attempt === attempts) return reply;
    await new Promise((resolve) => setTimeout(resolve, Number(reply.headers.get('retry-after') ?? '1') * 1000));
  }
}

/** The environment every node of one test cluster shares (its own Redis prefix), with `extra` on top. */
export function clusterEnv(databaseUrl: string, shards: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    REDIS_URL: process.env.TEST_REDIS_URL!,
    REDIS_KEY_PREFIX: `gs-cluster-${process.pid}-${Date.now()}:`,
    CLUSTER_SECRET: 'cluster-test-secret-0123456789abcdef',
    CLUSTER_SHARDS: String(shards),
    WEBHOOK_SECRET_KEY: 'webhook-key-shared-by-all-nodes-0123456789',
    BILLING_SIGNING_SECRET: 'billing-secret-shared-by-all-nodes-01234',
    BLOB_SIGNING_SECRET: 'blob-secret-shared-by-all-nodes-0123456789',
    CLUSTER_HEARTBEAT_MS: '250',
    CLUSTER_DEAD_AFTER_MS: '1500',
    CLUSTER_LEASE_MS: '1500',
    ALLOW_PRIVATE_EGRESS: 'true',
    LOG_LEVEL: 'warn',
    SHUTDOWN_TIMEOUT_MS: '5000',
    RATE_LIMIT_FREE: '100000',
    ...extra,
  };
}

/** A temporary DATA_DIR root for the nodes of one test, removed when t ends. */
export async function clusterDataDir(t: Test): Promise<string> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-cluster-'));
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  return dataDir;
}

/** Starts one node process under `id` (the same id again is a restart of that node); resolves once it listens. */
export async function startClusterNode(t: Test, id: string, env: Record<string, string>, dataDir: string): Promise<NodeProcess> {
  const child = startNode(t, 'test/fixtures/serve.ts', {
    ...env,
    CLUSTER: 'true',
    CLUSTER_NODE_ID: id,
    CLUSTER_INTERNAL_ADDRESS: '127.0.0.1',
    CLUSTER_INTERNAL_PORT: String(await freePort()),
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: path.join(dataDir, id),
  });
  const url = (await child.line(/^listening (\S+)/))[1]!;
  return { id, child, url, client: clientOf(url) };
}

/** Resolves once the node answers 200 on /health/ready (up, and the shards it took at start-up recovered). */
export function nodeReady(node: NodeProcess, timeoutMs = 30_000): Promise<true> {
  return eventually(
    `${node.id} ready`,
    async () => ((await fetch(`${node.url}/health/ready`).catch(() => undefined))?.status === 200 ? true : undefined),
    timeoutMs,
  );
}

/** The number of valid leases each node holds. */
export async function shardCounts(db: Database): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const row of await listLeases(db.em())) if (row.valid) counts[row.ownerNodeId!] = (counts[row.ownerNodeId!] ?? 0) + 1;
  return counts;
}

/** Resolves once the shards are spread over `nodes` nodes as evenly as possible. */
export function evenlySpread(db: Database, shards: number, nodes: number, timeoutMs = 30_000): Promise<Record<string, number>> {
  return eventually(
    `${shards} shards over ${nodes} nodes`,
    async () => {
      const counts = Object.values(await shardCounts(db));
      const low = Math.floor(shards / nodes);
      return counts.length === nodes && counts.every((n) => n === low || n === low + 1) && counts.reduce((x, y) => x + y, 0) === shards
        ? shardCounts(db)
        : undefined;
    },
    timeoutMs,
    50,
  );
}

/** The node holding the workspace's shard (a valid lease), if any. */
export async function ownerOf(db: Database, workspaceId: string, shards: number): Promise<string | undefined> {
  const shard = shardOf(workspaceId, shards);
  return (await listLeases(db.em())).find((row) => row.shard === shard && row.valid)?.ownerNodeId ?? undefined;
}

/** Starts the nodes and waits until each is ready and the shards are evenly spread. */
export async function startCluster(
  t: Test,
  db: Database,
  ids: string[],
  env: Record<string, string>,
  shards: number,
): Promise<{ nodes: NodeProcess[]; dataDir: string }> {
  const dataDir = await clusterDataDir(t);
  const nodes = await Promise.all(ids.map((id) => startClusterNode(t, id, env, dataDir)));
  await Promise.all(nodes.map((node) => nodeReady(node)));
  await evenlySpread(db, shards, ids.length);
  return { nodes, dataDir };
}

export { freePort };

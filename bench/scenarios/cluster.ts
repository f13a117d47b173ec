import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { round } from '../lib/load.ts';
import { scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import { freePort, processCpuSeconds } from '../lib/processes.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario } from '../lib/types.ts';
import { benchWorkspaces } from './generations.ts';

const SHARDS = 64;
/** How long the shards' owners must stay the same before a phase is measured (the default heartbeat is 1 s). */
const SETTLE_MS = 2_500;
/** Workspaces the creates go to in turn (a workspace holds 500 unfinished jobs at most; jobs are held). */
const WORKSPACES = Number(process.env.BENCH_CLUSTER_WORKSPACES ?? 96);
const CLIENTS = Number(process.env.BENCH_CLUSTER_CLIENTS ?? 64);
/** End to end: clients, and the most jobs left unfinished at once (the team plan runs 50 per workspace). */
const E2E_CLIENTS = 16;
const E2E_WORKSPACES = 6;
const E2E_MAX_OUTSTANDING = 150;
/** Forwarded vs local latency: creates sent one at a time, alternately to the owner and to another node. */
const LATENCY_WORKSPACES = 4;
const LATENCY_SAMPLES_PER_WORKSPACE = 100;
const REQUESTS_PER_MINUTE = '1000000';
const TERMINAL = `('succeeded', 'failed', 'cancelled', 'expired')`;

interface Node {
  server: ExtraServer;
  id: string;
}

/** Starts `count` cluster nodes on the scratch database at once (they migrate and join together) and waits until the shards are spread. */
async function startCluster(
  ctx: BenchContext,
  db: ScratchDatabase,
  label: string,
  count: number,
  env: Record<string, string>,
  dataDir: string,
  redisPrefix: string,
): Promise<Node[]> {
  const nodes = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const id = `${label}-${i + 1}`;
      const server = await ctx.startService(`cluster node ${id}`, {
        ...env,
        DATABASE_URL: db.url,
        REDIS_URL: process.env.BENCH_REDIS_URL?.trim() || 'redis://127.0.0.1:6379',
        REDIS_KEY_PREFIX: redisPrefix,
        CLUSTER: 'true',
        CLUSTER_NODE_ID: id,
        CLUSTER_INTERNAL_ADDRESS: '127.0.0.1',
        CLUSTER_INTERNAL_PORT: String(await freePort()),
        CLUSTER_SHARDS: String(SHARDS),
        CLUSTER_SECRET: `bench-cluster-secret-${'0123456789abcdef'.repeat(2)}`,
        WEBHOOK_SECRET_KEY: 'bench-webhook-key-shared-by-all-nodes-0123456789',
        BILLING_SIGNING_SECRET: 'bench-billing-secret-shared-by-all-nodes-0123',
        BLOB_SIGNING_SECRET: 'bench-blob-secret-shared-by-all-nodes-0123456789',
        DATA_DIR: dataDir,
        RATE_LIMIT_TEAM: REQUESTS_PER_MINUTE,
      });
      return { server, id };
    }),
  );
  const ids = nodes.map((n) => n.id);
  const deadline = Date.now() + 60_000;
  // Spread, then settled: the same owner and epoch for every shard over SETTLE_MS (a shard handed over is
  // answered 503 until its new owner adopts it at its next round).
  let settledSince: number | undefined;
  let lastView = '';
  for (;;) {
    const { rows } = await db.query<{ owner: string; n: string }>(
      `select owner_node_id as owner, count(*) as n from cluster_shard_leases
        where owner_node_id = any($1) and expires_at > now() group by 1`,
      [ids],
    );
    const held = rows.reduce((sum, r) => sum + Number(r.n), 0);
    if (held === SHARDS && rows.length === count && rows.every((r) => Number(r.n) >= Math.floor(SHARDS / count))) {
      const view = JSON.stringify((await db.query('select shard, owner_node_id, epoch from cluster_shard_leases order by shard')).rows);
      if (view !== lastView) {
        lastView = view;
        settledSince = Date.now();
      }
      if (Date.now() - settledSince! >= SETTLE_MS) break;
    } else {
      settledSince = undefined;
      lastView = '';
    }
    if (Date.now() > deadline) {
      const leases = await db.query(
        `select owner_node_id, count(*) as n, bool_and(expires_at > now()) as live from cluster_shard_leases group by 1 order by 1`,
      );
      const members = await db.query(`select node_id, status, now() - heartbeat_at as silent from cluster_members order by 1`);
      throw new Error(`the shards did not spread over ${count} node(s): leases ${JSON.stringify(leases.rows)}, members ${JSON.stringify(members.rows)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  ctx.log(`${count} node(s) up, ${SHARDS} shards spread`);
  return nodes;
}

async function stopCluster(nodes: Node[]): Promise<void> {
  await Promise.all(nodes.map((n) => n.server.stop()));
}

const jsonHeaders = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

function quantile(sorted: number[], p: number): number {
  return round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0, 2);
}

function cpuOf(nodes: Node[]): number | undefined {
  let sum = 0;
  for (const n of nodes) {
    const s = processCpuSeconds(n.server.pid);
    if (s === undefined) return undefined;
    sum += s;
  }
  return sum;
}

/**
 * Closed-loop creates for the run's warm-up then its measured duration: CLIENTS clients, each sending
 * to the nodes in turn (client i's k-th request to node (i + k) mod n) and to the workspaces in turn.
 */
async function creates(ctx: BenchContext, nodes: Node[], workspaces: Array<{ key: string; body: string }>, title: string): Promise<LoadSummary> {
  const agent = new Agent({ connections: CLIENTS });
  let phase: 'warm' | 'measure' | 'stop' = 'warm';
  let ok = 0;
  let refused = 0;
  let errors = 0;
  const statusCodes: Record<string, number> = {};
  const latencies: number[] = [];
  const clients = Array.from({ length: CLIENTS }, async (_, i) => {
    for (let k = 0; phase !== 'stop'; k++) {
      const node = nodes[(i + k) % nodes.length]!;
      const ws = workspaces[(i + k * CLIENTS) % workspaces.length]!;
      const sentAt = performance.now();
      try {
        const res = await request(`${node.server.url}/v1/generations`, { method: 'POST', headers: jsonHeaders(ws.key), body: ws.body, dispatcher: agent });
        await res.body.dump();
        if (phase !== 'measure') continue;
        statusCodes[res.statusCode] = (statusCodes[res.statusCode] ?? 0) + 1;
        if (res.statusCode === 201) {
          ok++;
          latencies.push(performance.now() - sentAt);
        } else refused++;
      } catch {
        if (phase === 'measure') errors++;
      }
    }
  });
  ctx.log(`${title}: ${ctx.options.warmupS} s warm-up, then ${ctx.options.durationS} s measured`);
  await new Promise((resolve) => setTimeout(resolve, ctx.options.warmupS * 1000));
  const cpuBefore = cpuOf(nodes);
  const t0 = performance.now();
  phase = 'measure';
  await new Promise((resolve) => setTimeout(resolve, ctx.options.durationS * 1000));
  phase = 'stop';
  const wallS = (performance.now() - t0) / 1000;
  const cpuAfter = cpuOf(nodes);
  await Promise.all(clients);
  await agent.close();
  latencies.sort((a, b) => a - b);
  const cpuS = cpuBefore !== undefined && cpuAfter !== undefined ? cpuAfter - cpuBefore : undefined;
  const summary: LoadSummary = {
    title,
    url: nodes.map((n) => n.server.url).join(' '),
    method: 'POST',
    connections: CLIENTS,
    pipelining: 1,
    durationS: round(wallS, 2),
    reqPerSec: round(ok / wallS, 1),
    totalRequests: ok + refused,
    latencyMs: {
      mean: round(latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length), 2),
      p50: quantile(latencies, 50),
      p90: quantile(latencies, 90),
      p99: quantile(latencies, 99),
      max: quantile(latencies, 100),
    },
    throughputBytesPerSec: 0,
    errors,
    timeouts: 0,
    non2xx: refused,
    statusCodes,
    serverCpuPercent: cpuS === undefined ? undefined : round((cpuS / wallS) * 100, 1),
    serverCpuUsPerRequest: cpuS === undefined || ok === 0 ? undefined : round((cpuS * 1e6) / ok, 2),
    loadGeneratorCpuPercent: 0,
    backgroundCpuPercent: undefined,
  };
  ctx.log(
    `${title}: ${summary.reqPerSec} creates/s, p50 ${summary.latencyMs.p50} ms, p99 ${summary.latencyMs.p99} ms, ${refused} refused, ${errors} errors, ${summary.serverCpuUsPerRequest ?? '?'} µs CPU per create (all nodes)`,
  );
  return summary;
}

/** Jobs per second from create to a terminal state (counted in the database), local provider at zero latency. */
async function endToEnd(
  ctx: BenchContext,
  db: ScratchDatabase,
  nodes: Node[],
  workspaces: Array<{ workspaceId: string; key: string; body: string }>,
): Promise<{ jobsPerS: number; failed: number; refused: number; refusedBy: Record<string, number> }> {
  const agent = new Agent({ connections: E2E_CLIENTS });
  const ids = workspaces.map((w) => w.workspaceId);
  const count = async () => {
    const { rows } = await db.query<{ all: string; done: string; failed: string }>(
      `select count(*) as all, count(*) filter (where status in ${TERMINAL}) as done, count(*) filter (where status in ('failed', 'cancelled', 'expired')) as failed
         from generations where workspace_id = any($1)`,
      [ids],
    );
    return { all: Number(rows[0]!.all), done: Number(rows[0]!.done), failed: Number(rows[0]!.failed) };
  };
  let stop = false;
  let unfinished = 0;
  let refused = 0;
  const refusedBy: Record<string, number> = {};
  const poller = (async () => {
    while (!stop) {
      const c = await count();
      unfinished = c.all - c.done;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const clients = Array.from({ length: E2E_CLIENTS }, async (_, i) => {
    for (let k = 0; !stop; k++) {
      if (unfinished >= E2E_MAX_OUTSTANDING) {
        await new Promise((resolve) => setTimeout(resolve, 2));
        continue;
      }
      unfinished++;
      const node = nodes[(i + k) % nodes.length]!;
      const ws = workspaces[(i + k * E2E_CLIENTS) % workspaces.length]!;
      try {
        const res = await request(`${node.server.url}/v1/generations`, { method: 'POST', headers: jsonHeaders(ws.key), body: ws.body, dispatcher: agent });
        await res.body.dump();
        if (res.statusCode !== 201) {
          refused++;
          refusedBy[res.statusCode] = (refusedBy[res.statusCode] ?? 0) + 1;
        }
      } catch {
        refused++;
        refusedBy.error = (refusedBy.error ?? 0) + 1;
      }
    }
  });
  await new Promise((resolve) => setTimeout(resolve, ctx.options.warmupS * 1000));
  const before = await count();
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, ctx.options.durationS * 1000));
  const after = await count();
  const wallS = (performance.now() - t0) / 1000;
  stop = true;
  await Promise.all([poller, ...clients]);
  await agent.close();
  const jobsPerS = round((after.done - before.done) / wallS, 1);
  ctx.log(
    `end to end on ${nodes.length} node(s): ${jobsPerS} jobs/s, ${after.failed - before.failed} not succeeded, ${refused} creates refused ${JSON.stringify(refusedBy)}`,
  );
  return { jobsPerS, failed: after.failed - before.failed, refused, refusedBy };
}

/** p50/p99 of creates sent one at a time to the owner of the workspace's shard and to another node, alternately. */
async function forwardedLatency(ctx: BenchContext, db: ScratchDatabase, nodes: Node[], workspaces: Array<{ workspaceId: string; key: string; body: string }>) {
  const agent = new Agent({ connections: 2 });
  const local: number[] = [];
  const forwarded: number[] = [];
  let bad = 0;
  for (const ws of workspaces) {
    const shard = shardOf(ws.workspaceId, SHARDS);
    const { rows } = await db.query<{ owner: string }>('select owner_node_id as owner from cluster_shard_leases where shard = $1', [shard]);
    const owner = nodes.find((n) => n.id === rows[0]?.owner);
    if (!owner) throw new Error(`no live owner for shard ${shard}`);
    const other = nodes.find((n) => n !== owner)!;
    const send = async (node: Node, into: number[] | undefined) => {
      const sentAt = performance.now();
      const res = await request(`${node.server.url}/v1/generations`, { method: 'POST', headers: jsonHeaders(ws.key), body: ws.body, dispatcher: agent });
      await res.body.dump();
      if (res.statusCode !== 201) bad++;
      else into?.push(performance.now() - sentAt);
    };
    for (let i = 0; i < 10; i++) {
      await send(owner, undefined);
      await send(other, undefined);
    } // warm connections and code paths
    for (let i = 0; i < LATENCY_SAMPLES_PER_WORKSPACE; i++) {
      await send(owner, local);
      await send(other, forwarded);
    }
  }
  await agent.close();
  local.sort((a, b) => a - b);
  forwarded.sort((a, b) => a - b);
  const figures = {
    localP50: quantile(local, 50),
    localP99: quantile(local, 99),
    forwardedP50: quantile(forwarded, 50),
    forwardedP99: quantile(forwarded, 99),
    samples: local.length,
    bad,
  };
  ctx.log(
    `forwarded vs local create, one at a time: p50 ${figures.forwardedP50} vs ${figures.localP50} ms, p99 ${figures.forwardedP99} vs ${figures.localP99} ms (${figures.samples} each, ${bad} not 201)`,
  );
  return figures;
}

/**
 * Cluster mode on PostgreSQL + Redis: 1 node vs 3 nodes on the same scratch database and Redis, clients
 * round robin over the nodes. Durable creates (jobs held by a 10-minute provider latency), end-to-end jobs
 * (local provider at zero latency), and the added latency of a request forwarded to the workspace's owner.
 */
export const cluster: Scenario = {
  name: 'cluster',
  description:
    'cluster mode (PostgreSQL + Redis): durable creates/s on 3 nodes vs 1 node, same database, clients round robin over the nodes; end-to-end jobs/s and forwarded-request latency in the notes',
  budgetS: 600,
  async run(ctx) {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-cluster-'));
    let nodes: Node[] = [];
    let db: ScratchDatabase | undefined;
    // Each phase on a scratch database (and Redis prefix) of its own, so no phase recovers the jobs another left.
    const phase = async <T>(
      label: string,
      count: number,
      env: Record<string, string>,
      work: (db: ScratchDatabase, nodes: Node[]) => Promise<T>,
    ): Promise<T> => {
      db = await scratchDatabase();
      try {
        nodes = await startCluster(ctx, db, label, count, env, dataDir, `gs-bench-cluster-${randomBytes(4).toString('hex')}:`);
        return await work(db, nodes);
      } finally {
        await stopCluster(nodes);
        nodes = [];
        await db.drop();
        db = undefined;
      }
    };
    try {
      const held = { LOCAL_PROVIDER_LATENCY_MS: '600000' };
      const instant = { LOCAL_PROVIDER_LATENCY_MS: '0' };

      // (a) durable creates, 1 node then 3 nodes; (c) forwarded vs local latency on the 3 nodes, before the load.
      const one = await phase('one', 1, held, async (db, nodes) =>
        creates(ctx, nodes, await benchWorkspaces(nodes[0]!.server, db, WORKSPACES), 'creates, 1 cluster node'),
      );
      const { three, latency } = await phase('three', 3, held, async (db, nodes) => {
        const provisioned = await benchWorkspaces(nodes[0]!.server, db, WORKSPACES + LATENCY_WORKSPACES);
        const latency = await forwardedLatency(ctx, db, nodes, provisioned.slice(WORKSPACES));
        const three = await creates(ctx, nodes, provisioned.slice(0, WORKSPACES), 'creates, 3 cluster nodes, round robin');
        return { three, latency };
      });
      // (b) end to end, 1 node then 3 nodes.
      const e2eOne = await phase('e2e-one', 1, instant, async (db, nodes) =>
        endToEnd(ctx, db, nodes, await benchWorkspaces(nodes[0]!.server, db, E2E_WORKSPACES)),
      );
      const e2eThree = await phase('e2e-three', 3, instant, async (db, nodes) =>
        endToEnd(ctx, db, nodes, await benchWorkspaces(nodes[0]!.server, db, E2E_WORKSPACES)),
      );

      const ratio = (a: number, b: number) => (b > 0 ? round(a / b, 3) : 0);
      return {
        result: three,
        baseline: one,
        notes: [
          `on this ${os.cpus().length}-core machine all nodes, PostgreSQL, Redis and the clients share the same cores: the 3/1 ratio measures the cost of clustering (2 of 3 requests forwarded, a node's share of the CPU), not scale-out`,
          `durable creates: ${three.reqPerSec}/s on 3 nodes vs ${one.reqPerSec}/s on 1 node (${ratio(three.reqPerSec, one.reqPerSec)}); p50 ${three.latencyMs.p50} vs ${one.latencyMs.p50} ms, p99 ${three.latencyMs.p99} vs ${one.latencyMs.p99} ms; CPU per create, all nodes: ${three.serverCpuUsPerRequest ?? '?'} vs ${one.serverCpuUsPerRequest ?? '?'} µs; ${CLIENTS} clients, ${WORKSPACES} team-plan workspaces, jobs held`,
          `end to end (create to terminal, local provider at zero latency, ${E2E_WORKSPACES} team-plan workspaces, ${E2E_CLIENTS} clients, at most ${E2E_MAX_OUTSTANDING} unfinished): ${e2eThree.jobsPerS} jobs/s on 3 nodes vs ${e2eOne.jobsPerS} on 1 (${ratio(e2eThree.jobsPerS, e2eOne.jobsPerS)}); not succeeded ${e2eThree.failed} / ${e2eOne.failed}, creates refused ${e2eThree.refused} ${JSON.stringify(e2eThree.refusedBy)} / ${e2eOne.refused} ${JSON.stringify(e2eOne.refusedBy)}`,
          `forwarded create (sent to a node that does not own the workspace's shard) vs local (sent to the owner), one at a time on a quiet 3-node cluster, ${latency.samples} of each: p50 ${latency.forwardedP50} vs ${latency.localP50} ms (${ratio(latency.forwardedP50, latency.localP50)}), p99 ${latency.forwardedP99} vs ${latency.localP99} ms (${ratio(latency.forwardedP99, latency.localP99)}); ${latency.bad} not 201`,
          'each phase runs on a scratch database and Redis key prefix of its own; the nodes of a phase start together (migrating one after the other) and are measured once the 64 shards are spread and their owners have stayed the same for 2.5 s',
        ],
      };
    } finally {
      await stopCluster(nodes);
      await (db as ScratchDatabase | undefined)?.drop();
      await rm(dataDir, { recursive: true, force: true });
    }
  },
};

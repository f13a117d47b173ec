import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Agent, request } from 'undici';
import { profileOf, summariseProfile } from '../lib/cpu-profile.ts';
import { round } from '../lib/load.ts';
import { backendPids, scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import {
  cpuBetween,
  freePort,
  processCpuSeconds,
  processesCpuSeconds,
  startNodeServer,
  stopServer,
  systemBusyCpuSeconds,
  waitUntilReady,
  type ChildServer,
} from '../lib/processes.ts';
import type { BenchContext, LoadSummary, Scenario } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';
import { benchWorkspaces } from './generations.ts';

/**
 * Peers: the same 10,000 no-op jobs through the service and through the job systems a user would pick
 * instead, in one run, by one harness. Every system gets the jobs from PRODUCERS concurrent producers in
 * this process (each its share, as fast as the system takes them) and runs them in a worker process of
 * its own (the service's process; bench/servers/peer-worker.ts for the others); a round lasts from the
 * first enqueue until the last job is done in the system's own store, read every POLL_MS. Rounds go in
 * turn over the systems (service, pg-boss, …, service, pg-boss, …) so that the machine's other load
 * falls on all alike; each figure is the median of ROUNDS, after a discarded warm-up round of WARMUP_JOBS.
 */
const JOBS = Number(process.env.BENCH_PEERS_JOBS ?? 10_000);
const PRODUCERS = 16;
const ROUNDS = Number(process.env.BENCH_PEERS_ROUNDS ?? 3);
const WARMUP_JOBS = Math.max(PRODUCERS, Math.round(JOBS / 10));
/** Jobs per insert of the systems that take batches (pg-boss insert, graphile-worker addJobs, BullMQ addBulk). */
const BATCH = 100;
const POLL_MS = 25;
const ROUND_TIMEOUT_MS = 300_000;
const STALL_MS = 60_000;
/**
 * The service's workspaces, in turn. A team-plan workspace runs 50 jobs at once and holds 500 unfinished
 * (domain/plans.ts, QUEUE_FACTOR 10, applied in actors/workspace/decide-create.ts): the producers do not wait for jobs to
 * finish, so one workspace would refuse most of 10,000; 400 per workspace leaves room.
 */
const WORKSPACES = Number(process.env.BENCH_PEERS_WORKSPACES ?? Math.max(1, Math.ceil(JOBS / 400)));
const REDIS_URL = process.env.BENCH_REDIS_URL?.trim() || 'redis://127.0.0.1:6379';
const QUEUE = 'bench-noop';
const PG_BOSS_WORKERS = 4;
const PG_BOSS_BATCH = 500;
const BULLMQ_CONCURRENCY = 50;

interface Round {
  jobs: number;
  seconds: number;
  /** From the first enqueue until every producer was answered. */
  enqueueSeconds: number;
  /** CPU of the system's worker process (the service's process for the service). */
  workerCpuSeconds: number | undefined;
  /**
   * CPU of the system's store: the PostgreSQL backends connected to its scratch database (the harness's
   * count queries included, alike for all) or its own redis-server; undefined for the shared Redis.
   */
  storeCpuSeconds: number | undefined;
  /** CPU of the whole machine (every process, the database, Redis, this harness and others' load). */
  machineCpuSeconds: number | undefined;
  /** Bytes the worker process's heap allocated during the round (the service with BENCH_TRACE_GC), or undefined. */
  allocatedBytes: number | undefined;
  refused: number;
  failed: number;
}

/** One system under test, set up and ready for rounds. */
interface System {
  name: string;
  durable: string;
  settings: string;
  workerPid: number;
  /**
   * Its PostgreSQL database, if it has one: vacuumed and analysed before each round, outside the timed part,
   * as autovacuum would keep it (the bench machine's server runs with autovacuum off).
   */
  database?: ScratchDatabase;
  /** The processes of its store whose CPU counts for it (PostgreSQL backends of its database, its own Redis), or undefined. */
  storePids?(): Promise<number[]>;
  /** Milliseconds each enqueue call took (the service: each POST), for its latency. */
  enqueueMs?: number[];
  /** Producer `p` enqueues `count` jobs; resolves when the system took all of them (acknowledged each); returns the refusals it retried. */
  produce(p: number, count: number): Promise<number>;
  /** Jobs done so far (cumulative), and jobs ended otherwise. */
  finished(): Promise<{ done: number; failed: number }>;
  /** What the store holds, for the message of a round that did not finish. */
  diagnose?(): Promise<string>;
  /** Profile summary notes (service only, with BENCH_CPU_PROF_DIR), then cleanup. */
  stop(): Promise<string[]>;
  /** Bytes its worker process allocated so far (the service with BENCH_TRACE_GC: its `--trace-gc` lines). */
  allocatedBytes?(): number | undefined;
}

const shareOf = (p: number, total: number) => Math.floor(total / PRODUCERS) + (p < total % PRODUCERS ? 1 : 0);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** CPU seconds of each of the store's processes now. */
async function storeCpu(system: System): Promise<Map<number, number> | undefined> {
  return system.storePids ? processesCpuSeconds(await system.storePids()) : undefined;
}

async function runRound(system: System, jobs: number): Promise<Round> {
  await system.database?.query('vacuum analyze');
  const before = await system.finished();
  const store0 = await storeCpu(system);
  const cpu0 = processCpuSeconds(system.workerPid);
  const machine0 = systemBusyCpuSeconds();
  const allocated0 = system.allocatedBytes?.();
  const t0 = performance.now();
  let enqueuedAt = 0;
  const refusals = await Promise.all(Array.from({ length: PRODUCERS }, (_, p) => system.produce(p, shareOf(p, jobs))));
  enqueuedAt = performance.now();
  let now = before;
  let progressAt = performance.now();
  let last = -1;
  for (;;) {
    now = await system.finished();
    if (now.done + now.failed - before.done - before.failed >= jobs) break;
    if (now.done + now.failed !== last) {
      last = now.done + now.failed;
      progressAt = performance.now();
    }
    // All enqueued and nothing finished for STALL_MS, or the round's limit: the jobs left are stuck.
    if (performance.now() - t0 > ROUND_TIMEOUT_MS || performance.now() - progressAt > STALL_MS) {
      const state = await system.diagnose?.().catch((error: Error) => error.message);
      throw new Error(
        `${system.name}: ${now.done - before.done} of ${jobs} jobs done after ${Math.round((performance.now() - t0) / 1000)} s, the last ${Math.round((performance.now() - progressAt) / 1000)} s without one${state ? `; ${state}` : ''}`,
      );
    }
    await sleep(POLL_MS);
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu1 = processCpuSeconds(system.workerPid);
  const machine1 = systemBusyCpuSeconds();
  const store1 = await storeCpu(system);
  const allocated1 = system.allocatedBytes?.();
  return {
    jobs: now.done - before.done,
    seconds,
    enqueueSeconds: (enqueuedAt - t0) / 1000,
    workerCpuSeconds: cpu0 === undefined || cpu1 === undefined ? undefined : cpu1 - cpu0,
    storeCpuSeconds: cpuBetween(store0, store1),
    machineCpuSeconds: machine0 === undefined || machine1 === undefined ? undefined : machine1 - machine0,
    allocatedBytes: allocated0 === undefined || allocated1 === undefined ? undefined : allocated1 - allocated0,
    refused: refusals.reduce((a, b) => a + b, 0),
    failed: now.failed - before.failed,
  };
}

async function startWorker(name: string, env: Record<string, string>): Promise<ChildServer> {
  const server = startNodeServer(name, 'bench/servers/peer-worker.ts', await freePort(), { LOG_LEVEL: 'warn', ...env });
  await waitUntilReady(server, '/health/ready', 60_000);
  return server;
}

async function cpuProfileNotes(label: string, pid: number): Promise<string[]> {
  const dir = process.env.BENCH_CPU_PROF_DIR;
  if (!dir) return [];
  // The process writes its profile as it exits; give it a moment.
  for (let i = 0; i < 50; i++) {
    const file = await profileOf(dir, pid);
    if (file) {
      try {
        const { busyMs, startUpMs, shares } = await summariseProfile(file);
        const top = shares
          .slice(0, 14)
          .map((s) => `${s.category} ${s.percent} %`)
          .join(', ');
        return [
          `CPU profile of ${label}, self time by category (${busyMs} ms busy over its life, set-up of workspaces and warm-up included; ${startUpMs} ms more loading modules, left out): ${top}`,
        ];
      } catch {
        // Still being written.
      }
    }
    await sleep(100);
  }
  return [`CPU profile of ${label}: no profile found in ${dir}`];
}

/**
 * (a) The service, done when `succeeded` in its database: one POST /v1/generations per job (201 once
 * committed), or, `batched`, POST /v1/generations/batch with BATCH jobs a call like the peers' batched
 * inserts (its 200 once every accepted item is committed; refused items are sent again).
 */
async function serviceSystem(ctx: BenchContext, clustered: boolean, batched = false): Promise<System> {
  const db = await scratchDatabase();
  const cleanup: Array<() => Promise<void>> = [() => db.drop()];
  try {
    const env: Record<string, string> = { DATABASE_URL: db.url, RATE_LIMIT_TEAM: '1000000', LOCAL_PROVIDER_LATENCY_MS: '0' };
    if (clustered) {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-peers-'));
      cleanup.unshift(() => rm(dataDir, { recursive: true, force: true }));
      Object.assign(env, {
        REDIS_URL,
        REDIS_KEY_PREFIX: `gs-bench-peers-${randomBytes(4).toString('hex')}:`,
        CLUSTER: 'true',
        CLUSTER_NODE_ID: 'peers-1',
        CLUSTER_INTERNAL_ADDRESS: '127.0.0.1',
        CLUSTER_INTERNAL_PORT: String(await freePort()),
        CLUSTER_SECRET: `bench-cluster-secret-${'0123456789abcdef'.repeat(2)}`,
        WEBHOOK_SECRET_KEY: 'bench-webhook-key-shared-by-all-nodes-0123456789',
        BILLING_SIGNING_SECRET: 'bench-billing-secret-shared-by-all-nodes-0123',
        BLOB_SIGNING_SECRET: 'bench-blob-secret-shared-by-all-nodes-0123456789',
        DATA_DIR: dataDir,
      });
    }
    const name = clustered
      ? 'service, CLUSTER=true, 1 node (PostgreSQL + Redis)'
      : `service (PostgreSQL)${batched ? ', batches of 100' : ', one create per job'}`;
    // BENCH_TRACE_GC: the service prints its collections, from which its allocation per job is read.
    // BENCH_ALLOC_PROF_DIR: the service samples what it allocates (bench/lib/allocation-probe.ts).
    const server = await ctx.startService(name, env, [
      ...(process.env.BENCH_TRACE_GC ? ['--trace-gc'] : []),
      ...(process.env.BENCH_ALLOC_PROF_DIR ? ['--import', './bench/lib/allocation-probe.ts'] : []),
    ]);
    cleanup.unshift(() => server.stop());
    if (clustered) {
      // Measured once the node holds every shard (a shard not yet adopted answers 503).
      for (let i = 0; ; i++) {
        const { rows } = await db.query<{ n: string }>(`select count(*) as n from cluster_shard_leases where owner_node_id = 'peers-1' and expires_at > now()`);
        const total = await db.query<{ n: string }>('select count(*) as n from cluster_shard_leases');
        if (Number(rows[0]!.n) > 0 && rows[0]!.n === total.rows[0]!.n) break;
        if (i > 300) throw new Error('the cluster node did not take its shards');
        await sleep(200);
      }
      await sleep(1_500);
    }
    const workspaces = await benchWorkspaces(server, db, WORKSPACES);
    const ids = workspaces.map((w) => w.workspaceId);
    const agent = new Agent({ connections: PRODUCERS });
    cleanup.unshift(() => agent.close());
    const url = `${server.url}/v1/generations${batched ? '/batch' : ''}`;
    const headers = workspaces.map((w) => ({ authorization: `Bearer ${w.key}`, 'content-type': 'application/json' }));
    const item = JSON.parse(workspaces[0]!.body) as Record<string, unknown>;
    delete item.workspaceId;
    /** The body of a batch of `n` jobs for workspace `i`. */
    const batchBody = (i: number, n: number) => JSON.stringify({ workspaceId: workspaces[i]!.workspaceId, items: Array.from({ length: n }, () => item) });
    let next = 0;
    const enqueueMs: number[] = [];
    return {
      name,
      database: db,
      storePids: () => backendPids(db),
      enqueueMs,
      durable: batched
        ? 'yes: 200 after every accepted job of the batch and its credit reservation are committed (synchronous_commit on)'
        : 'yes: 201 after the job and its credit reservation are committed (synchronous_commit on)',
      settings: `${batched ? `POST /v1/generations/batch with ${BATCH} jobs a call` : 'one POST /v1/generations per job'}, ${WORKSPACES} team-plan workspaces in turn, LOCAL_PROVIDER_LATENCY_MS=0${clustered ? ', one cluster node owning all shards' : ''}`,
      workerPid: server.pid,
      allocatedBytes: server.allocatedBytes,
      async produce(_p, count) {
        let refused = 0;
        for (let sent = 0; sent < count; ) {
          const i = next++ % workspaces.length;
          const sentAt = performance.now();
          const n = batched ? Math.min(BATCH, count - sent) : 1;
          const res = await request(url, { method: 'POST', headers: headers[i], body: batched ? batchBody(i, n) : workspaces[i]!.body, dispatcher: agent });
          const text = await res.body.text();
          enqueueMs.push(performance.now() - sentAt);
          const created = res.statusCode === 201 ? 1 : res.statusCode === 200 && batched ? (JSON.parse(text) as { created: number }).created : 0;
          sent += created;
          if (created === n) continue;
          refused += n - created;
          if (refused > 1000) throw new Error(`${name}: creates refused: ${res.statusCode} ${text.slice(0, 2000)}`);
          await sleep(5);
        }
        return refused;
      },
      async finished() {
        // The usage rollups (one row per workspace, key and day, moved in the transaction that ends each job):
        // the same counts as the generations' statuses, without reading every job's row at each poll, which
        // grew with the rows of the rounds before and charged the service's store for the harness's reads.
        const { rows } = await db.query<{ done: string | null; failed: string | null }>(
          `select sum(succeeded) as done, sum(failed + cancelled + expired) as failed from usage_rollups where workspace_id = any($1)`,
          [ids],
        );
        return { done: Number(rows[0]!.done ?? 0), failed: Number(rows[0]!.failed ?? 0) };
      },
      async diagnose() {
        const { rows } = await db.query<{ status: string; n: string; oldest: string }>(
          `select status, count(*) as n, min(updated_at)::text as oldest from generations where workspace_id = any($1) group by status order by status`,
          [ids],
        );
        const leases = clustered
          ? `; shard leases ${JSON.stringify((await db.query(`select owner_node_id, count(*) as n, bool_and(expires_at > now()) as live, max(epoch) as epoch from cluster_shard_leases group by 1`)).rows)}`
          : '';
        return `generations by status ${JSON.stringify(rows)}${leases}; now ${new Date().toISOString()}`;
      },
      async stop() {
        await server.stop();
        const notes = await cpuProfileNotes(`the ${name} process`, server.pid);
        for (const step of cleanup) await step();
        return notes;
      },
    };
  } catch (error) {
    for (const step of cleanup) await step().catch(() => {});
    throw error;
  }
}

/** (b) pg-boss: batched inserts, PG_BOSS_WORKERS workers fetching PG_BOSS_BATCH jobs at a time at its shortest polling interval. */
async function pgBossSystem(): Promise<System> {
  const db = await scratchDatabase();
  let worker: ChildServer | undefined;
  try {
    worker = await startWorker('pg-boss workers', {
      PEER_SYSTEM: 'pg-boss',
      PEER_DATABASE_URL: db.url,
      PEER_PGBOSS_WORKERS: String(PG_BOSS_WORKERS),
      PEER_PGBOSS_BATCH: String(PG_BOSS_BATCH),
    });
    const { default: PgBoss } = await import('pg-boss');
    const boss = new PgBoss({ connectionString: db.url, max: PRODUCERS, schedule: false, supervise: false, migrate: false });
    boss.on('error', () => {});
    await boss.start();
    const w = worker;
    return {
      name: 'pg-boss 10.4.2',
      database: db,
      storePids: () => backendPids(db),
      durable: 'yes: rows in PostgreSQL, committed with synchronous_commit on',
      settings: `insert() in batches of ${BATCH}; ${PG_BOSS_WORKERS} work() workers, batchSize ${PG_BOSS_BATCH}, pollingIntervalSeconds 0.5 (its minimum)`,
      workerPid: w.pid,
      async produce(_p, count) {
        for (let left = count; left > 0; left -= BATCH) {
          await boss.insert(Array.from({ length: Math.min(BATCH, left) }, () => ({ name: QUEUE, data: { prompt: 'Say hello in five words.' } })));
        }
        return 0;
      },
      async finished() {
        const { rows } = await db.query<{ done: string; failed: string }>(
          `select count(*) filter (where state = 'completed') as done, count(*) filter (where state in ('failed', 'cancelled')) as failed from pgboss.job where name = $1`,
          [QUEUE],
        );
        return { done: Number(rows[0]!.done), failed: Number(rows[0]!.failed) };
      },
      async stop() {
        await boss.stop({ graceful: false, wait: true });
        await stopServer(w);
        await db.drop();
        return [];
      },
    };
  } catch (error) {
    if (worker) await stopServer(worker);
    await db.drop();
    throw error;
  }
}

/** (c) graphile-worker: addJob one at a time with its defaults, or addJobs batches with the settings of its Performance page. */
async function graphileSystem(fast: boolean): Promise<System> {
  const db = await scratchDatabase();
  let worker: ChildServer | undefined;
  try {
    worker = await startWorker(`graphile-worker${fast ? ' (fast)' : ''}`, {
      PEER_SYSTEM: fast ? 'graphile-worker-fast' : 'graphile-worker',
      PEER_DATABASE_URL: db.url,
    });
    const { makeWorkerUtils } = await import('graphile-worker');
    const pool = new pg.Pool({ connectionString: db.url, max: PRODUCERS });
    pool.on('error', () => {});
    pool.on('connect', (client) => {
      client.on('error', () => {});
    });
    const utils = await makeWorkerUtils({ pgPool: pool });
    let added = 0;
    const w = worker;
    const payload = { prompt: 'Say hello in five words.' };
    return {
      name: `graphile-worker 0.17.3${fast ? ', fast settings' : ', defaults'}`,
      database: db,
      storePids: () => backendPids(db),
      durable: 'yes: rows in PostgreSQL, committed with synchronous_commit on',
      settings: fast
        ? `addJobs() in batches of ${BATCH}; concurrency 24, maxPoolSize 25, localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0 (its Performance page)`
        : 'addJob() per job; run() with its defaults (concurrency 1, pool 10, LISTEN/NOTIFY)',
      workerPid: w.pid,
      async produce(_p, count) {
        if (fast) {
          for (let left = count; left > 0; left -= BATCH) {
            const n = Math.min(BATCH, left);
            await utils.addJobs(Array.from({ length: n }, () => ({ identifier: QUEUE, payload })));
            added += n;
          }
        } else {
          for (let i = 0; i < count; i++) {
            await utils.addJob(QUEUE, payload);
            added++;
          }
        }
        return 0;
      },
      async finished() {
        // A job done is deleted; one that failed stays, with its error, to be retried.
        const { rows } = await db.query<{ left: string; failed: string }>(
          `select count(*) as left, count(*) filter (where last_error is not null) as failed from graphile_worker._private_jobs`,
        );
        return { done: added - Number(rows[0]!.left), failed: Number(rows[0]!.failed) };
      },
      async stop() {
        await utils.release();
        await pool.end();
        await stopServer(w);
        await db.drop();
        return [];
      },
    };
  } catch (error) {
    if (worker) await stopServer(worker);
    await db.drop();
    throw error;
  }
}

/** A Redis server of our own with every write fsynced before its answer (appendfsync always), in a scratch folder. */
async function durableRedis(): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-redis-'));
  const port = await freePort();
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', ''],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = `redis://127.0.0.1:${port}`;
  const { createClient } = await import('redis');
  for (let i = 0; ; i++) {
    const client = createClient({ url });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.ping();
      await client.quit();
      break;
    } catch {
      await client.disconnect().catch(() => {});
      if (i > 50) {
        child.kill('SIGKILL');
        throw new Error('redis-server (appendfsync always) did not start');
      }
      await sleep(100);
    }
  }
  return {
    url,
    pid: child.pid!,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** (d) BullMQ: addBulk batches, a Worker with concurrency BULLMQ_CONCURRENCY, its own key prefix (deleted after). */
async function bullmqSystem(durable: boolean): Promise<System> {
  const own = durable ? await durableRedis() : undefined;
  const redisUrl = own?.url ?? REDIS_URL;
  const prefix = `gs-bench-peers-${randomBytes(4).toString('hex')}`;
  let worker: ChildServer | undefined;
  try {
    worker = await startWorker(`BullMQ worker${durable ? ' (appendfsync always)' : ''}`, {
      PEER_SYSTEM: 'bullmq',
      PEER_REDIS_URL: redisUrl,
      PEER_PREFIX: prefix,
      PEER_BULLMQ_CONCURRENCY: String(BULLMQ_CONCURRENCY),
    });
    const { Queue } = await import('bullmq');
    const url = new URL(redisUrl);
    const queue = new Queue(QUEUE, { connection: { host: url.hostname, port: Number(url.port || 6379) }, prefix });
    await queue.waitUntilReady();
    const w = worker;
    const data = { prompt: 'Say hello in five words.' };
    return {
      name: `BullMQ 6.7.0${durable ? ', Redis with appendfsync always' : ''}`,
      ...(own ? { storePids: async () => [own.pid] } : {}),
      durable: durable
        ? 'yes: a Redis of its own with appendonly yes, appendfsync always (each write fsynced before its answer)'
        : 'no: the shared Redis runs with appendonly no and no snapshots; BullMQ itself does not fsync',
      settings: `addBulk() in batches of ${BATCH}; one Worker, concurrency ${BULLMQ_CONCURRENCY}; completed jobs kept (its default)`,
      workerPid: w.pid,
      async produce(_p, count) {
        for (let left = count; left > 0; left -= BATCH) {
          await queue.addBulk(Array.from({ length: Math.min(BATCH, left) }, () => ({ name: 'noop', data })));
        }
        return 0;
      },
      async finished() {
        const counts = await queue.getJobCounts('completed', 'failed');
        return { done: counts.completed ?? 0, failed: counts.failed ?? 0 };
      },
      async stop() {
        await stopServer(w);
        await queue.obliterate({ force: true }).catch(() => {});
        await queue.close();
        await own?.stop();
        return [];
      },
    };
  } catch (error) {
    if (worker) await stopServer(worker);
    await own?.stop();
    throw error;
  }
}

interface Measured {
  system: System;
  rounds: Round[];
}

function summary(m: Measured): LoadSummary {
  const perS = m.rounds.map((r) => r.jobs / r.seconds);
  const rate = median(perS);
  const cpu = m.rounds.map((r) => r.workerCpuSeconds).filter((c): c is number => c !== undefined);
  const cpuUs = cpu.length === m.rounds.length ? median(m.rounds.map((r) => (r.workerCpuSeconds! * 1e6) / r.jobs)) : undefined;
  return measuredSummary({
    title: `${m.system.name}: ${JOBS} no-op jobs, enqueue to done, ${PRODUCERS} producers (median of ${m.rounds.length})`,
    url: m.system.settings,
    method: 'jobs',
    connections: PRODUCERS,
    durationS: round(median(m.rounds.map((r) => r.seconds)), 2),
    reqPerSec: round(rate, 1),
    totalRequests: m.rounds.reduce((a, r) => a + r.jobs, 0),
    errors: m.rounds.reduce((a, r) => a + r.failed, 0),
    serverCpuUsPerRequest: cpuUs === undefined ? undefined : round(cpuUs, 1),
    serverCpuPercent: cpu.length === m.rounds.length ? round(median(m.rounds.map((r) => (r.workerCpuSeconds! / r.seconds) * 100)), 1) : undefined,
  });
}

/** How busy the machine's cores were during the system's rounds (median): its CPU over the round's time on every core. */
function busyShare(m: Measured): number | undefined {
  if (!m.rounds.every((r) => r.machineCpuSeconds !== undefined)) return undefined;
  return round(median(m.rounds.map((r) => (r.machineCpuSeconds! / (r.seconds * os.availableParallelism())) * 100)), 0);
}

/** The median over the rounds of a CPU reading per job, in whole µs; undefined if a round lacks it. */
function perJobUs(m: Measured, reading: 'machineCpuSeconds' | 'storeCpuSeconds'): number | undefined {
  if (!m.rounds.every((r) => r[reading] !== undefined)) return undefined;
  return Math.round(median(m.rounds.map((r) => (r[reading]! * 1e6) / r.jobs)));
}

function describe(m: Measured): string {
  const s = summary(m);
  const rounds = m.rounds.map((r) => `${Math.round(r.jobs / r.seconds)}`).join(', ');
  const machineUs = perJobUs(m, 'machineCpuSeconds');
  const machine =
    machineUs === undefined ? '' : `, whole machine (other helpers' load included) ${machineUs} µs CPU per job, the machine ${busyShare(m)} % busy`;
  const enqueue = Math.round(median(m.rounds.map((r) => r.jobs / r.enqueueSeconds)));
  const storeUs = perJobUs(m, 'storeCpuSeconds');
  const store = storeUs === undefined ? '' : `, its store (PostgreSQL backends of its database, or its own redis-server) ${storeUs} µs`;
  const latencies = [...(m.system.enqueueMs ?? [])].sort((a, b) => a - b);
  const at = (p: number) => round(latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0, 1);
  const enqueueLatency = latencies.length > 0 ? ` (each enqueue p50 ${at(50)} ms, p99 ${at(99)} ms)` : '';
  const refused = m.rounds.reduce((a, r) => a + r.refused, 0);
  const allocated = m.rounds.every((r) => r.allocatedBytes !== undefined)
    ? `; heap allocated per job by the worker process (its --trace-gc, BENCH_TRACE_GC) ${Math.round(median(m.rounds.map((r) => r.allocatedBytes! / r.jobs)) / 1024)} KB`
    : '';
  return (
    `${m.system.name}: ${s.reqPerSec} jobs/s (rounds ${rounds}), enqueued at ${enqueue} jobs/s${enqueueLatency}; CPU per job: worker process ${s.serverCpuUsPerRequest ?? '?'} µs${store}${machine}${allocated}` +
    `${s.errors > 0 ? `, ${s.errors} jobs failed` : ''}${refused > 0 ? `, ${refused} enqueues refused and sent again` : ''}; durable: ${m.system.durable}; settings: ${m.system.settings}`
  );
}

export const peers: Scenario = {
  name: 'peers',
  description: `end-to-end jobs/s, ${JOBS} no-op durable jobs from ${PRODUCERS} producers: the service on PostgreSQL vs pg-boss, graphile-worker and BullMQ in the same run`,
  budgetS: 1_800,
  async run(ctx) {
    const makers: Array<[string, () => Promise<System>]> = [
      ['service', () => serviceSystem(ctx, false)],
      ['service-batch', () => serviceSystem(ctx, false, true)],
      ['service-cluster', () => serviceSystem(ctx, true)],
      ['pg-boss', () => pgBossSystem()],
      ['graphile-worker', () => graphileSystem(false)],
      ['graphile-worker-fast', () => graphileSystem(true)],
      ['bullmq', () => bullmqSystem(false)],
      ['bullmq-durable', () => bullmqSystem(true)],
    ];
    const only = process.env.BENCH_PEERS_SYSTEMS?.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    // BENCH_PEERS_SYSTEMS (comma-separated keys) runs only those, and the service's two rounds always.
    const always = new Set(['service', 'service-batch']);
    const chosen = makers.filter(([key]) => !only?.length || only.includes(key) || always.has(key));
    const measured: Array<Measured & { key: string }> = [];
    const notes: string[] = [];
    try {
      // A peer (or the clustered service) that fails is left out with its error in the notes; the service must not fail.
      const failedOut = async (m: Measured & { key: string }, error: Error) => {
        if (always.has(m.key)) throw error;
        ctx.log(`peers: ${m.key} left out: ${error.message}`);
        notes.push(`${m.system.name} left out of the figures: ${error.message}`);
        measured.splice(measured.indexOf(m), 1);
        notes.push(...(await m.system.stop().catch((e: Error) => [`${m.key}: cleanup failed: ${e.message}`])));
      };
      for (const [key, make] of chosen) {
        ctx.log(`peers: setting up ${key}`);
        const system = await make();
        const m = { key, system, rounds: [] as Round[] };
        measured.push(m);
        try {
          const warm = await runRound(system, WARMUP_JOBS);
          ctx.log(`peers: ${system.name} warm-up: ${warm.jobs} jobs in ${warm.seconds.toFixed(2)} s`);
          system.enqueueMs?.splice(0);
        } catch (error) {
          await failedOut(m, error as Error);
        }
      }
      for (let r = 1; r <= ROUNDS; r++) {
        for (const m of [...measured]) {
          let result: Round;
          try {
            result = await runRound(m.system, JOBS);
          } catch (error) {
            await failedOut(m, error as Error);
            continue;
          }
          m.rounds.push(result);
          ctx.log(
            `peers round ${r}: ${m.system.name}: ${result.jobs} jobs in ${result.seconds.toFixed(2)} s = ${Math.round(result.jobs / result.seconds)} jobs/s` +
              ` (enqueued in ${result.enqueueSeconds.toFixed(2)} s), worker CPU ${result.workerCpuSeconds === undefined ? '?' : Math.round((result.workerCpuSeconds * 1e6) / result.jobs)} µs/job` +
              `${result.storeCpuSeconds === undefined ? '' : `, store CPU ${Math.round((result.storeCpuSeconds * 1e6) / result.jobs)} µs/job`}` +
              `${result.allocatedBytes === undefined ? '' : `, worker heap allocation ${Math.round(result.allocatedBytes / result.jobs / 1024)} KB/job`}` +
              `${result.failed ? `, ${result.failed} failed` : ''}${result.refused ? `, ${result.refused} refused` : ''}`,
          );
        }
      }
    } finally {
      for (const m of measured.reverse()) notes.push(...(await m.system.stop().catch((error: Error) => [`${m.key}: cleanup failed: ${error.message}`])));
      measured.reverse();
    }
    const by = (key: string) => measured.find((m) => m.key === key);
    // The figure compared is the batched round: the peers enqueue BATCH jobs a call too.
    const service = summary(by('service-batch')!);
    const single = summary(by('service')!);
    const ratioTo = (key: string, of = service) => {
      const m = by(key);
      return m ? round(of.reqPerSec / summary(m).reqPerSec, 2) : undefined;
    };
    const pgBoss = by('pg-boss');
    const pgBossRate = pgBoss ? summary(pgBoss).reqPerSec : undefined;
    const cell = (n: number | undefined) => (n === undefined ? '?' : n.toLocaleString('en-US'));
    const table = {
      title: `each system's jobs/s and CPU per job (median of ${ROUNDS} rounds of ${JOBS} jobs; the machine's share counts every process)`,
      header: ['system', 'jobs/s', '÷ pg-boss', 'machine busy %', 'machine CPU µs/job', 'worker CPU µs/job', 'store CPU µs/job'],
      rows: measured.map((m) => {
        const s = summary(m);
        return [
          m.system.name,
          cell(s.reqPerSec),
          pgBossRate ? round(s.reqPerSec / pgBossRate, 2).toFixed(2) : '—',
          cell(busyShare(m)),
          cell(perJobUs(m, 'machineCpuSeconds')),
          cell(s.serverCpuUsPerRequest === undefined ? undefined : round(s.serverCpuUsPerRequest, 0)),
          cell(perJobUs(m, 'storeCpuSeconds')),
        ];
      }),
    };
    return {
      table,
      result: service,
      baseline: pgBoss ? summary(pgBoss) : undefined,
      target: pgBoss ? 1 : undefined,
      notes: [
        `each system: ${JOBS} jobs from ${PRODUCERS} concurrent producers, as fast as the system takes them, no-op work, timed from the first enqueue to the last job done in the system's store (read every ${POLL_MS} ms); median of ${ROUNDS} rounds taken in turn over the systems, after a warm-up of ${WARMUP_JOBS} jobs each`,
        ...measured.map(describe),
        `service with batches of ${BATCH} (like the peers' batched inserts; the figure of the table) ÷ pg-boss: ${ratioTo('pg-boss') ?? '-'} (target ≥ 1, with the whole machine's CPU per job at most pg-boss's); ÷ BullMQ: ${ratioTo('bullmq') ?? '-'} (target ≥ 0.5; BullMQ on a Redis without persistence is not durable)${by('bullmq-durable') ? `; ÷ BullMQ with appendfsync always: ${ratioTo('bullmq-durable')}` : ''}` +
          `${by('graphile-worker-fast') ? `; ÷ graphile-worker (fast): ${ratioTo('graphile-worker-fast')}; one create per job ÷ graphile-worker (fast): ${ratioTo('graphile-worker-fast', single)} (target ≥ 1.5)` : ''}; batches ÷ one create per job: ${round(service.reqPerSec / single.reqPerSec, 2)}`,
        `service with one create per job ÷ pg-boss: ${ratioTo('pg-boss', single) ?? '-'}; ÷ BullMQ: ${ratioTo('bullmq', single) ?? '-'}${by('graphile-worker') ? `; ÷ graphile-worker (defaults, addJob() per job): ${ratioTo('graphile-worker', single)}` : ''}` +
          `${by('service-cluster') ? `; clustered (one create per job) ÷ single node: ${round(summary(by('service-cluster')!).reqPerSec / single.reqPerSec, 2)}` : ''}`,
        `before each round (outside its time) every system's PostgreSQL database is vacuumed and analysed, as autovacuum would keep it: the bench machine's server runs with autovacuum off, and without it the service's hot rows (each workspace's account, usage rollup and key spend, updated with every job) slowed each round more than the one before`,
        `the service's jobs go to ${WORKSPACES} team-plan workspaces in turn: one workspace runs 50 jobs at once and refuses creates past 500 unfinished, which 10,000 jobs sent without waiting would pass; the peers have no such per-tenant limits`,
        `CPU per job: the worker process is the one running the jobs (the service's own process; the peer's worker process); the store is the PostgreSQL backends connected to the system's scratch database (its producers', its workers' and the harness's count queries, alike for all) or the durable BullMQ's own redis-server (the shared Redis is not counted); "whole machine" counts every process, other helpers' load included, so it is only a rough bound`,
        ...notes,
      ],
    };
  },
};

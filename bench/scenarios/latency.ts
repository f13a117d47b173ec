import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { round } from '../lib/load.ts';
import { backendPids, runPgbench, scratchDatabase, type PgbenchResult, type ScratchDatabase } from '../lib/postgres.ts';
import { cpuBetween, freePort, processCpuSeconds, processesCpuSeconds } from '../lib/processes.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';
import { benchWorkspaces } from './generations.ts';

/**
 * Latency of one client, on PostgreSQL: (a) one client creating in a closed loop (each create sent when
 * the previous one answered) with the jobs held, against pgbench's one client inserting one row per
 * transaction; (b) create → succeeded at a steady 200 jobs/s on the local provider at zero latency.
 */
const REQUESTS_PER_MINUTE = '1000000';
/** (a) Workspaces the one client's creates go to in turn: jobs are held, and a workspace holds 500 unfinished at most. */
const RATE_WORKSPACES = Number(process.env.BENCH_LATENCY_WORKSPACES ?? 48);
/** (b) Offered jobs per second, issued every TICK_MS. */
const STEADY_RATE = Number(process.env.BENCH_LATENCY_RATE ?? 200);
const TICK_MS = 5;
const INSERT_SCRIPT = "insert into bench_rows (payload) values ('one durable row');\n";
const P99_TARGET_MS = 10;

const jsonHeaders = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

function quantile(sorted: number[], p: number): number {
  return round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN, 2);
}

interface Mode {
  cluster: boolean;
  label: string;
}

/** The service on the scratch database, alone or as the one node of a cluster (CLUSTER=true, Redis). */
async function startOne(ctx: BenchContext, db: ScratchDatabase, mode: Mode, providerLatencyMs: number, dataDir: string): Promise<ExtraServer> {
  const env: Record<string, string> = { DATABASE_URL: db.url, RATE_LIMIT_TEAM: REQUESTS_PER_MINUTE, LOCAL_PROVIDER_LATENCY_MS: String(providerLatencyMs) };
  if (mode.cluster) {
    Object.assign(env, {
      REDIS_URL: process.env.BENCH_REDIS_URL?.trim() || 'redis://127.0.0.1:6379',
      REDIS_KEY_PREFIX: `gs-bench-latency-${randomBytes(4).toString('hex')}:`,
      CLUSTER: 'true',
      CLUSTER_NODE_ID: 'latency-1',
      CLUSTER_INTERNAL_ADDRESS: '127.0.0.1',
      CLUSTER_INTERNAL_PORT: String(await freePort()),
      CLUSTER_SECRET: `bench-cluster-secret-${'0123456789abcdef'.repeat(2)}`,
      WEBHOOK_SECRET_KEY: 'bench-webhook-key-shared-by-all-nodes-0123456789',
      BILLING_SIGNING_SECRET: 'bench-billing-secret-shared-by-all-nodes-0123',
      BLOB_SIGNING_SECRET: 'bench-blob-secret-shared-by-all-nodes-0123456789',
      DATA_DIR: dataDir,
    });
  }
  const server = await ctx.startService(`service (${mode.label}, provider latency ${providerLatencyMs} ms)`, env);
  if (mode.cluster) {
    // The one node must hold every shard before it answers creates of any workspace.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const { rows } = await db.query<{ n: string; total: string }>(
        `select count(*) filter (where owner_node_id = 'latency-1' and expires_at > now()) as n, count(*) as total from cluster_shard_leases`,
      );
      if (Number(rows[0]!.total) > 0 && rows[0]!.n === rows[0]!.total) break;
      if (Date.now() > deadline) throw new Error('the cluster node did not take its shards');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  return server;
}

/** The team plan's concurrent jobs per workspace (domain/plans.ts). */
const TEAM_CONCURRENCY = 50;

/** (a) Fills each workspace's job slots with held jobs, one batch request per workspace; the probe job of benchWorkspaces counts. */
async function takeEverySlot(url: string, workspaces: Array<{ workspaceId: string; key: string; body: string }>): Promise<void> {
  for (const [i, ws] of workspaces.entries()) {
    const item = JSON.parse(ws.body) as Record<string, unknown>;
    delete item.workspaceId;
    const items = Array.from({ length: i === 0 ? TEAM_CONCURRENCY - 1 : TEAM_CONCURRENCY }, () => item);
    const res = await request(`${url}/v1/generations/batch`, {
      method: 'POST',
      headers: jsonHeaders(ws.key),
      body: JSON.stringify({ workspaceId: ws.workspaceId, items }),
    });
    const answer = (await res.body.json()) as { created?: number };
    if (res.statusCode !== 200 || answer.created !== items.length) throw new Error(`filling the job slots: ${res.statusCode} ${JSON.stringify(answer)}`);
  }
}

/** (a) One client, closed loop, round robin over the workspaces, for `durationS`; answers other than 201 are errors. */
async function oneClient(
  url: string,
  workspaces: Array<{ key: string; body: string }>,
  durationS: number,
): Promise<{ ok: number; errors: number; wallS: number; latencies: number[] }> {
  const agent = new Agent({ connections: 1 });
  const latencies: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  const end = t0 + durationS * 1000;
  try {
    for (let i = 0; performance.now() < end; i++) {
      const ws = workspaces[i % workspaces.length]!;
      const sent = performance.now();
      try {
        const res = await request(`${url}/v1/generations`, { method: 'POST', headers: jsonHeaders(ws.key), body: ws.body, dispatcher: agent });
        await res.body.dump();
        if (res.statusCode === 201) latencies.push(performance.now() - sent);
        else errors++;
      } catch {
        errors++;
      }
    }
  } finally {
    await agent.close();
  }
  return { ok: latencies.length, errors, wallS: (performance.now() - t0) / 1000, latencies: latencies.sort((a, b) => a - b) };
}

/**
 * (b) Creates at a steady STEADY_RATE (open loop, a few every TICK_MS) into one team-plan workspace for
 * `seconds`; the ids of the 201s. Create → succeeded comes from the jobs' own timestamps afterwards.
 */
async function steady(url: string, ws: { key: string; body: string }, seconds: number): Promise<{ ids: string[]; answerMs: number[]; errors: number }> {
  const agent = new Agent({ connections: 64 });
  const ids: string[] = [];
  const answerMs: number[] = [];
  let errors = 0;
  const pending = new Set<Promise<void>>();
  const one = async () => {
    const sent = performance.now();
    try {
      const res = await request(`${url}/v1/generations`, { method: 'POST', headers: jsonHeaders(ws.key), body: ws.body, dispatcher: agent });
      const text = await res.body.text();
      if (res.statusCode !== 201) {
        errors++;
        return;
      }
      answerMs.push(performance.now() - sent);
      ids.push((JSON.parse(text) as { id: string }).id);
    } catch {
      errors++;
    }
  };
  const t0 = performance.now();
  let issued = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const elapsed = performance.now() - t0;
      if (elapsed >= seconds * 1000) {
        clearInterval(timer);
        resolve();
        return;
      }
      const due = Math.floor((elapsed / 1000) * STEADY_RATE);
      while (issued < due) {
        issued++;
        const p = one();
        pending.add(p);
        void p.finally(() => pending.delete(p));
      }
    }, TICK_MS);
  });
  await Promise.all(pending);
  await agent.close();
  return { ids, answerMs: answerMs.sort((a, b) => a - b), errors };
}

async function endToEnd(ctx: BenchContext, db: ScratchDatabase, server: ExtraServer, ws: { workspaceId: string; key: string; body: string }) {
  await steady(server.url, ws, ctx.options.warmupS);
  const cpuBefore = processCpuSeconds(server.pid);
  const t0 = performance.now();
  const run = await steady(server.url, ws, ctx.options.durationS);
  const wallS = (performance.now() - t0) / 1000;
  const cpuAfter = processCpuSeconds(server.pid);
  // Wait for the measured jobs to finish (at zero provider latency they do at once), then read their timestamps.
  const deadline = Date.now() + 30_000;
  let rows: Array<{ status: string; ms: number | null }> = [];
  for (;;) {
    rows = (
      await db.query<{ status: string; ms: number | null }>(
        `select status, extract(epoch from (completed_at - created_at)) * 1000 as ms from generations where id = any($1)`,
        [run.ids],
      )
    ).rows;
    if (rows.every((r) => ['succeeded', 'failed', 'cancelled', 'expired'].includes(r.status)) || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const done = rows
    .filter((r) => r.status === 'succeeded')
    .map((r) => Number(r.ms))
    .sort((a, b) => a - b);
  // Where the time goes: each step of the succeeded jobs' timelines (queued → reserved → submitted → running → succeeded).
  const steps = (
    await db.query<{ step: string; p50: number; p99: number }>(
      `select s.status as step, percentile_cont(0.5) within group (order by s.ms) as p50, percentile_cont(0.99) within group (order by s.ms) as p99
       from generations g,
       lateral (select e->>'status' as status, n,
                       extract(epoch from ((e->>'at')::timestamptz - lag((e->>'at')::timestamptz) over (order by n))) * 1000 as ms
                  from jsonb_array_elements(g.timeline) with ordinality as t(e, n)) s
      where g.id = any($1) and g.status = 'succeeded' and s.ms is not null
      group by s.status order by min(s.n)`,
      [run.ids],
    )
  ).rows;
  return {
    offered: STEADY_RATE,
    jobsPerSec: round(done.length / wallS, 1),
    succeeded: done.length,
    notSucceeded: run.ids.length - done.length,
    createErrors: run.errors,
    p50: quantile(done, 50),
    p90: quantile(done, 90),
    p99: quantile(done, 99),
    max: quantile(done, 100),
    answerP50: quantile(run.answerMs, 50),
    answerP99: quantile(run.answerMs, 99),
    steps: steps.map((st) => `→ ${st.step} p50 ${round(Number(st.p50), 1)} ms, p99 ${round(Number(st.p99), 1)} ms`).join('; '),
    cpuUsPerJob: cpuBefore !== undefined && cpuAfter !== undefined && done.length > 0 ? round(((cpuAfter - cpuBefore) * 1e6) / done.length, 1) : undefined,
  };
}

/**
 * (a) Where one client's time goes: the database's CPU per create (its backends, while the loop ran) against
 * pgbench's per insert, and the rate that CPU alone would allow were the service and its client free
 * (each create waits for its own statements: in a closed loop of one, nothing overlaps them).
 */
function databaseShare(rate: number, creates: number, dbCpuS: number | undefined, serviceCpuS: number | undefined, pgbench: PgbenchResult): string[] {
  if (dbCpuS === undefined || creates === 0) return [];
  const perCreateUs = (dbCpuS * 1e6) / creates;
  const perInsertUs =
    pgbench.backendCpuSeconds === undefined || pgbench.transactions === 0 ? undefined : (pgbench.backendCpuSeconds * 1e6) / pgbench.transactions;
  const ceiling = 1e6 / perCreateUs;
  return [
    `one client, per create: the database's backends ${Math.round(perCreateUs)} µs of CPU${perInsertUs === undefined ? '' : ` (pgbench's backend per insert: ${Math.round(perInsertUs)} µs)`}, ` +
      `the service ${serviceCpuS === undefined ? '?' : Math.round((serviceCpuS * 1e6) / creates)} µs, ${round(1e6 / rate, 0)} µs of wall time in all; ` +
      `were the service and its client free, the database's CPU alone would allow ${Math.round(ceiling)} creates/s, ${(ceiling / pgbench.tps).toFixed(2)} of pgbench's one client`,
  ];
}

function latencyScenario(mode: Mode): Scenario {
  return {
    name: mode.cluster ? 'latency-cluster' : 'latency',
    description: `one client's durable creates/s vs pgbench's one-client insert, and create → succeeded p99 at a steady ${STEADY_RATE} jobs/s (PostgreSQL, ${mode.label})`,
    async run(ctx) {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-latency-'));
      const rateDb = await scratchDatabase();
      const e2eDb = await scratchDatabase();
      let server: ExtraServer | undefined;
      try {
        // (a) One client, jobs held by a 10-minute provider latency (the plan's 50 run, the rest queue).
        server = await startOne(ctx, rateDb, mode, 600_000, dataDir);
        const workspaces = await benchWorkspaces(server, rateDb, RATE_WORKSPACES);
        // The steady state the run is meant to measure: every workspace's job slots already taken, so a
        // create queues its job and the figure is the create's own (as in generation-create-postgres).
        await takeEverySlot(server.url, workspaces);
        ctx.log(`one client: every workspace's ${TEAM_CONCURRENCY} slots taken; ${ctx.options.warmupS} s warm-up, then ${ctx.options.durationS} s measured`);
        await oneClient(server.url, workspaces, ctx.options.warmupS);
        const cpuBefore = processCpuSeconds(server.pid);
        const dbBefore = processesCpuSeconds(await backendPids(rateDb));
        const single = await oneClient(server.url, workspaces, ctx.options.durationS);
        const cpuAfter = processCpuSeconds(server.pid);
        const dbCpuS = cpuBetween(dbBefore, processesCpuSeconds(await backendPids(rateDb)));
        await server.stop();
        server = undefined;
        const rate = single.ok / single.wallS;
        const cpuS = cpuBefore !== undefined && cpuAfter !== undefined ? cpuAfter - cpuBefore : undefined;
        ctx.log(
          `one client: ${Math.round(rate)} creates/s, p50 ${quantile(single.latencies, 50)} ms, p99 ${quantile(single.latencies, 99)} ms, ${single.errors} errors`,
        );

        // (b) Steady 200 jobs/s into one team-plan workspace, provider at zero latency.
        server = await startOne(ctx, e2eDb, mode, 0, dataDir);
        const [ws] = await benchWorkspaces(server, e2eDb, 1);
        const e2e = await endToEnd(ctx, e2eDb, server, ws!);
        await server.stop();
        server = undefined;
        ctx.log(
          `steady ${STEADY_RATE}/s: create→succeeded p50 ${e2e.p50} ms, p99 ${e2e.p99} ms (201 p50 ${e2e.answerP50} ms, p99 ${e2e.answerP99} ms), ${e2e.notSucceeded} not succeeded, ${e2e.createErrors} refused`,
        );

        await rateDb.query(
          'create table if not exists bench_rows (id bigserial primary key, payload text not null, created_at timestamptz not null default now())',
        );
        const pgbench = await runPgbench(rateDb.url, INSERT_SCRIPT, 1, ctx.options.durationS, rateDb);
        ctx.log(`pgbench, 1 client: ${Math.round(pgbench.tps)} tps`);

        const result: LoadSummary = measuredSummary({
          title: `one client, durable POST /v1/generations in a loop (PostgreSQL, ${mode.label})`,
          url: '/v1/generations',
          method: 'POST',
          connections: 1,
          durationS: round(single.wallS, 2),
          reqPerSec: round(rate, 1),
          totalRequests: single.ok,
          latencyMs: {
            mean: round(single.latencies.reduce((a, b) => a + b, 0) / Math.max(1, single.ok), 2),
            p50: quantile(single.latencies, 50),
            p90: quantile(single.latencies, 90),
            p99: quantile(single.latencies, 99),
            max: quantile(single.latencies, 100),
          },
          errors: single.errors + e2e.notSucceeded + e2e.createErrors,
          serverCpuUsPerRequest: cpuS === undefined || single.ok === 0 ? undefined : round((cpuS * 1e6) / single.ok, 1),
        });
        const baseline = measuredSummary({
          title: 'pgbench: one-row insert per transaction, synchronous_commit on, 1 client',
          url: 'postgres (scratch database)',
          method: 'INSERT',
          connections: 1,
          durationS: ctx.options.durationS,
          reqPerSec: round(pgbench.tps, 1),
          totalRequests: pgbench.transactions,
          latencyMs: { mean: pgbench.latencyMsAverage, p50: NaN, p90: NaN, p99: NaN, max: NaN },
        });
        return {
          result,
          baseline,
          target: 0.5,
          notes: [
            `${mode.label}; one client in a closed loop over ${RATE_WORKSPACES} team-plan workspaces whose 50 job slots were taken first, jobs held (provider latency 10 minutes), so each create queues its job: ${round(rate, 1)} creates/s ÷ pgbench ${round(pgbench.tps, 1)} tps = ${(rate / pgbench.tps).toFixed(2)} (target ≥ 0.5)`,
            ...databaseShare(rate, single.ok, dbCpuS, cpuS, pgbench),
            `create → succeeded at a steady ${STEADY_RATE} jobs/s (one team-plan workspace, local provider at zero latency, the jobs' created_at to completed_at): p50 ${e2e.p50} ms, p90 ${e2e.p90} ms, p99 ${e2e.p99} ms, max ${e2e.max} ms; ${P99_TARGET_MS} ms ÷ p99 = ${(P99_TARGET_MS / e2e.p99).toFixed(2)} (target ≥ 1); ${e2e.jobsPerSec} jobs/s done, service CPU ${e2e.cpuUsPerJob ?? '?'} µs per job`,
            `the steps of those jobs (timeline): ${e2e.steps}`,
            `the 201 of those creates: p50 ${e2e.answerP50} ms, p99 ${e2e.answerP99} ms; ${e2e.notSucceeded} jobs did not succeed, ${e2e.createErrors} creates were refused`,
          ],
        };
      } finally {
        await server?.stop();
        await rateDb.drop();
        await e2eDb.drop();
        await rm(dataDir, { recursive: true, force: true });
      }
    },
  };
}

/** Without cluster mode, and as the one node of a cluster (CLUSTER=true: fenced writes, Redis). */
export const latency = latencyScenario({ cluster: false, label: 'single service' });
export const latencyCluster = latencyScenario({ cluster: true, label: 'one cluster node (CLUSTER=true)' });

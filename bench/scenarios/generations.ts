import { Agent, request } from 'undici';
import { createKey, signUp } from '../lib/accounts.ts';
import { round } from '../lib/load.ts';
import { runPgbench, scratchDatabase, type PgbenchResult, type ScratchDatabase } from '../lib/postgres.ts';
import { processCpuSeconds } from '../lib/processes.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';

/**
 * Clients of the durable-create run (a) (BENCH_CREATE_CONNECTIONS). A group commit holds as many creates
 * as are in flight, so its throughput grows with the number of clients; 256 stands for a fleet of API
 * clients. With the harness's default of 100 the same service measured about 4,100 creates/s (0.7-0.8 of
 * pgbench's one client) on the 2-core machine, against about 5,100-5,500 with 256.
 */
const CREATE_CONNECTIONS = Number(process.env.BENCH_CREATE_CONNECTIONS ?? 256);
/** Per-key limit of the bench's services: no run comes near it. */
const REQUESTS_PER_MINUTE = '1000000';
/** Credits given to the bench workspace, so no create is refused for want of them. */
const CREDITS = 100_000_000;
/** The cheapest job: one credit, a short text answer from the built-in local provider. */
const MODEL = 'local/text-mini';
/**
 * Workspaces the creates of (a) go to in turn: at 500 unfinished jobs each they hold 320,000 creates, enough for
 * the warm-up and two measured runs (a noisy one is repeated) at 10,000/s. With 320 (160,000) a run of
 * 2026-11-27 at 8,577/s filled every workspace during its repeated run, whose last creates were refused.
 */
const WORKSPACES = 640;
/** The team plan's concurrent jobs per workspace (domain/plans.ts). */
const TEAM_CONCURRENCY = 50;
const INSERT_SCRIPT = "insert into bench_rows (payload) values ('one durable row');\n";

interface BenchWorkspace {
  workspaceId: string;
  key: string;
  body: string;
}

/**
 * `count` workspaces of one account on the team plan (50 concurrent jobs, 500 unfinished at most) with
 * CREDITS credits each, and a generations key for each. Plan and credits are set in the database before
 * the workspaces' actors first load them, with a ledger entry, so each ledger still sums to its balance.
 */
export async function benchWorkspaces(server: ExtraServer, db: ScratchDatabase, count: number): Promise<BenchWorkspace[]> {
  const account = await signUp(server.url);
  const ids = [account.workspaceId];
  while (ids.length < count) {
    const res = await fetch(`${server.url}/v1/workspaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: account.cookie },
      body: JSON.stringify({ name: `bench ${ids.length}` }),
    });
    if (res.status !== 201) throw new Error(`creating a workspace: ${res.status} ${await res.text()}`);
    ids.push(((await res.json()) as { id: string }).id);
  }
  await db.query(`update workspaces set plan = 'team' where id = any($1)`, [ids]);
  await db.query(
    `insert into workspace_accounts (workspace_id, available_credits, reserved_credits, wallet_cents, reserved_wallet_cents, wallet_activated, updated_at)
     select id, $2, 0, 0, 0, false, now() from unnest($1::text[]) as id`,
    [ids, CREDITS],
  );
  await db.query(
    `insert into credit_ledger (id, workspace_id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, generation_id, reference, created_at)
     select 'led_bench_' || id, id, 'grant', $2, 0, 0, 0, null, 'bench:credits', now() from unnest($1::text[]) as id`,
    [ids, CREDITS],
  );
  const out: BenchWorkspace[] = [];
  for (const workspaceId of ids) {
    const key = await createKey(server.url, { cookie: account.cookie, workspaceId }, ['generations.write', 'generations.read']);
    const body = JSON.stringify({ workspaceId, mode: 'text_to_text', model: MODEL, params: { prompt: 'Say hello in five words.' } });
    out.push({ workspaceId, key, body });
  }
  const probe = await fetch(`${server.url}/v1/generations`, { method: 'POST', headers: jsonHeaders(out[0]!.key), body: out[0]!.body });
  const text = await probe.text();
  if (probe.status !== 201) throw new Error(`probe POST /v1/generations: ${probe.status} ${text}`);
  return out;
}

function jsonHeaders(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
}

/** pgbench's figures as the harness's LoadSummary (transactions count as requests). */
function pgbenchSummary(result: PgbenchResult, durationS: number): LoadSummary {
  return measuredSummary({
    title: `pgbench: one-row insert per transaction, synchronous_commit on, ${result.clients} client${result.clients === 1 ? '' : 's'}`,
    url: 'postgres (scratch database)',
    method: 'INSERT',
    connections: result.clients,
    durationS,
    reqPerSec: round(result.tps, 1),
    totalRequests: result.transactions,
    latencyMs: { mean: result.latencyMsAverage, p50: NaN, p90: NaN, p99: NaN, max: NaN },
    throughputBytesPerSec: 0,
    errors: 0,
  });
}

async function pgbenchInserts(ctx: BenchContext, db: ScratchDatabase, clients: number): Promise<PgbenchResult> {
  await db.query('create table if not exists bench_rows (id bigserial primary key, payload text not null, created_at timestamptz not null default now())');
  ctx.log(`pgbench: one-row inserts, ${clients} client(s), ${ctx.options.durationS} s`);
  const result = await runPgbench(db.url, INSERT_SCRIPT, clients, ctx.options.durationS);
  ctx.log(`pgbench, ${clients} client(s): ${Math.round(result.tps)} tps, ${result.latencyMsAverage} ms average latency`);
  return result;
}

/**
 * (a) Durable creates: POST /v1/generations answered 201 only after the generation and its credit
 * reservation are committed, against pgbench's one-row durable insert per transaction on the same
 * database in the same run. Jobs are given a provider latency of 10 minutes, so after the plan's 50
 * concurrent jobs the rest stay queued and the run measures creation, not execution; as a workspace
 * holds 500 unfinished jobs at most, creates go round robin to WORKSPACES workspaces. The warm-up goes
 * on until every workspace's 50 slots are taken, so the measured run is the steady state.
 */
export const generationCreate: Scenario = {
  name: 'generation-create-postgres',
  description: 'durable POST /v1/generations (Bearer key, text job, PostgreSQL) vs pgbench one-row durable insert, 1 client, same database and run',
  async run(ctx) {
    const db = await scratchDatabase();
    let server: ExtraServer | undefined;
    try {
      server = await ctx.startService('service (PostgreSQL, jobs held)', {
        DATABASE_URL: db.url,
        RATE_LIMIT_TEAM: REQUESTS_PER_MINUTE,
        LOCAL_PROVIDER_LATENCY_MS: '600000',
      });
      // Jobs are held, and a workspace holds at most 500 unfinished: creates go round robin over many.
      const workspaces = await benchWorkspaces(server, db, WORKSPACES);
      const title = 'service POST /v1/generations (PostgreSQL)';
      const variants = workspaces.map((w) => ({ headers: jsonHeaders(w.key), body: w.body }));
      const load = { server, method: 'POST' as const, path: '/v1/generations', variants, skipWarmup: true, connections: CREATE_CONNECTIONS };
      // Warm-up until every workspace's job slots are taken and every started job has reached its provider:
      // the measured run then sees the steady state of a busy service, creates queueing behind running jobs,
      // not the one-off start of the first WORKSPACES × 50 jobs.
      let warmed = 0;
      const slots = WORKSPACES * TEAM_CONCURRENCY;
      for (let round = 1; ; round++) {
        const warm = await ctx.load({ ...load, title: `${title} (warm-up ${round})`, durationS: ctx.options.warmupS });
        warmed += warm.statusCodes['201'] ?? 0;
        const { rows } = await db.query<{ started: string; starting: string }>(
          `select count(*) filter (where status in ('submitted', 'running')) as started, count(*) filter (where status = 'reserved') as starting
             from generations where workspace_id = any($1)`,
          [workspaces.map((w) => w.workspaceId)],
        );
        const started = Number(rows[0]!.started);
        ctx.log(`warm-up ${round}: ${started} of ${slots} job slots taken, ${rows[0]!.starting} jobs starting`);
        if (started >= slots && Number(rows[0]!.starting) === 0) break;
        if (round >= 20) throw new Error(`the job slots did not fill during the warm-up (${started} of ${slots})`);
      }
      const result = await ctx.load({ ...load, title });
      const answered = 1 + warmed + (result.statusCodes['201'] ?? 0);
      if (result.non2xx > 0) ctx.log(`answers by status: ${JSON.stringify(result.statusCodes)}`);
      await server.stop();
      server = undefined;
      const committed = Number(
        (await db.query<{ n: string }>('select count(*) as n from generations where workspace_id = any($1)', [workspaces.map((w) => w.workspaceId)])).rows[0]!
          .n,
      );
      if (committed < answered) throw new Error(`only ${committed} generations committed for ${answered} 201 answers`);

      const single = await pgbenchInserts(ctx, db, 1);
      const many = await pgbenchInserts(ctx, db, Math.min(ctx.options.connections, 50));
      return {
        result,
        baseline: pgbenchSummary(single, ctx.options.durationS),
        target: 1.0,
        notes: [
          `p99 latency of a durable create: ${result.latencyMs.p99} ms (p50 ${result.latencyMs.p50} ms) with ${result.connections} connections`,
          `warm-up until all ${WORKSPACES * TEAM_CONCURRENCY} job slots were taken: ${warmed} creates`,
          `durability check: ${committed} generations in the database, at least the ${answered} answered 201 counted (probe, warm-up and the reported attempt; a repeated noisy attempt adds its own)`,
          `pgbench with ${many.clients} clients (Postgres groups their WAL flushes): ${Math.round(many.tps)} tps, ${many.latencyMsAverage} ms average; the service is at ${(result.reqPerSec / many.tps).toFixed(2)} of that`,
        ],
      };
    } finally {
      await server?.stop();
      await db.drop();
    }
  },
};

const CREATORS = 16;
/** Jobs created but not finished at most: twice the team plan's concurrency, so the scheduler always has work. */
const MAX_OUTSTANDING = 100;
const POLL_MS = 20;

/**
 * (b) End to end: jobs per second from create to succeeded on the local provider at zero latency
 * (LOCAL_PROVIDER_LATENCY_MS=0), PostgreSQL. CREATORS clients keep MAX_OUTSTANDING jobs in the system;
 * finished jobs are counted in the database every POLL_MS (not by polling the API), and create-to-done
 * latencies come from each job's createdAt and completedAt.
 */
export const generationEndToEnd: Scenario = {
  name: 'generation-end-to-end-postgres',
  description:
    'jobs/s from POST /v1/generations to succeeded, local provider at zero latency, team plan (50 concurrent), PostgreSQL; vs pgbench one-row durable insert, 1 client',
  async run(ctx) {
    const db = await scratchDatabase();
    let server: ExtraServer | undefined;
    const agent = new Agent({ connections: CREATORS });
    try {
      server = await ctx.startService('service (PostgreSQL, local provider at zero latency)', {
        DATABASE_URL: db.url,
        RATE_LIMIT_TEAM: REQUESTS_PER_MINUTE,
        LOCAL_PROVIDER_LATENCY_MS: '0',
      });
      const [ws] = (await benchWorkspaces(server, db, 1)) as [BenchWorkspace];
      const url = `${server.url}/v1/generations`;
      const headers = jsonHeaders(ws.key);

      let created = 1;
      let finished = 0;
      let createErrors = 0;
      let stop = false;
      const count = async () => {
        const { rows } = await db.query<{ done: string; failed: string }>(
          `select count(*) filter (where status in ('succeeded', 'failed', 'cancelled', 'expired')) as done,
                  count(*) filter (where status in ('failed', 'cancelled', 'expired')) as failed
             from generations where workspace_id = $1`,
          [ws.workspaceId],
        );
        return { done: Number(rows[0]!.done), failed: Number(rows[0]!.failed) };
      };
      const poller = (async () => {
        while (!stop) {
          finished = (await count()).done;
          await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        }
      })();
      const creators = Array.from({ length: CREATORS }, async () => {
        while (!stop) {
          if (created - finished >= MAX_OUTSTANDING) {
            await new Promise((resolve) => setTimeout(resolve, 2));
            continue;
          }
          created++;
          try {
            const res = await request(url, { method: 'POST', headers, body: ws.body, dispatcher: agent });
            await res.body.dump();
            if (res.statusCode !== 201) {
              createErrors++;
              created--;
            }
          } catch {
            createErrors++;
            created--;
          }
        }
      });

      ctx.log(`end to end: ${ctx.options.warmupS} s warm-up (discarded), then ${ctx.options.durationS} s measured`);
      await new Promise((resolve) => setTimeout(resolve, ctx.options.warmupS * 1000));
      const before = await count();
      const startedAt = new Date();
      const cpuBefore = processCpuSeconds(server.pid);
      const t0 = performance.now();
      await new Promise((resolve) => setTimeout(resolve, ctx.options.durationS * 1000));
      const after = await count();
      const wallS = (performance.now() - t0) / 1000;
      const cpuAfter = processCpuSeconds(server.pid);
      const endedAt = new Date();
      stop = true;
      await Promise.all([poller, ...creators]);

      const { rows } = await db.query<{ ms: number }>(
        `select extract(epoch from (completed_at - created_at)) * 1000 as ms from generations
          where workspace_id = $1 and status = 'succeeded' and completed_at >= $2 and completed_at < $3 order by 1`,
        [ws.workspaceId, startedAt, endedAt],
      );
      const latencies = rows.map((r) => Number(r.ms));
      const at = (p: number) => round(latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0, 1);
      const jobs = after.done - before.done;
      const failed = after.failed - before.failed;
      const cpuS = cpuBefore !== undefined && cpuAfter !== undefined ? cpuAfter - cpuBefore : undefined;
      const result: LoadSummary = {
        title: 'service: create to succeeded, local provider at zero latency (PostgreSQL)',
        url,
        method: 'POST + run',
        connections: CREATORS,
        pipelining: 1,
        durationS: round(wallS, 2),
        reqPerSec: round(jobs / wallS, 1),
        totalRequests: jobs,
        latencyMs: {
          mean: round(latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length), 1),
          p50: at(50),
          p90: at(90),
          p99: at(99),
          max: at(100),
        },
        throughputBytesPerSec: 0,
        errors: failed + createErrors,
        timeouts: 0,
        non2xx: 0,
        statusCodes: {},
        serverCpuPercent: cpuS === undefined ? undefined : round((cpuS / wallS) * 100, 1),
        serverCpuUsPerRequest: cpuS === undefined || jobs === 0 ? undefined : round((cpuS * 1e6) / jobs, 2),
        loadGeneratorCpuPercent: 0,
        backgroundCpuPercent: undefined,
      };
      ctx.log(
        `end to end: ${jobs} jobs finished in ${wallS.toFixed(1)} s (${result.reqPerSec} jobs/s), ${failed} not succeeded, ${createErrors} creates refused; create→succeeded p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms; service CPU ${result.serverCpuUsPerRequest ?? '?'} µs per job`,
      );
      await server.stop();
      server = undefined;
      const single = await pgbenchInserts(ctx, db, 1);
      return {
        result,
        baseline: pgbenchSummary(single, ctx.options.durationS),
        notes: [
          `${CREATORS} clients keep at most ${MAX_OUTSTANDING} jobs unfinished (the team plan runs 50 at once; the rest queue); model ${MODEL}`,
          `create→succeeded latency p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms, including time queued behind the plan's concurrency`,
          `${failed} jobs did not succeed, ${createErrors} creates were refused`,
        ],
      };
    } finally {
      await agent.close();
      await server?.stop();
      await db.drop();
    }
  },
};

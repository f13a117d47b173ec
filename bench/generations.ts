// `BENCH_DATABASE_URL=postgres://… node --import tsx bench/generations.ts`: the generation scenarios, on
// PostgreSQL, each on a fresh database of that server (dropped afterwards).
//
// (a) durable creates: POST /v1/generations per second, closed loop, BENCH_CONNECTIONS requests at a time
//     over BENCH_WORKSPACES team workspaces, each 201 sent only after the generation and its credit
//     reservation committed. The jobs stay queued (one local job runs at a time, for ten minutes), so only
//     creation is measured. pgbench runs a single-row durable insert (autocommit, synchronous_commit as the
//     server has it) with as many clients, for as long, on the same database in the same run: the ratio is
//     creates/s ÷ pgbench tps.
// (b) end to end: BENCH_E2E_JOBS text jobs on the local provider at zero latency, from the first create to
//     the last `succeeded` (timestamps from the database): jobs per second.
//
// Results: printed, and written to bench/results/generations-latest.{json,md}.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { Agent, request } from 'undici';
import { freePort, repoRoot, startNodeServer, stopAll, stopServer, tail, waitUntilReady, type ChildServer } from './lib/processes.ts';

const run = promisify(execFile);

function int(name: string, fallback: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new Error(`${name}: expected a positive whole number`);
  return Number(raw);
}

const baseUrl = process.env.BENCH_DATABASE_URL?.trim();
if (!baseUrl?.startsWith('postgres')) {
  process.stderr.write('BENCH_DATABASE_URL=postgres://… is required (the scenarios compare with pgbench on the same server)\n');
  process.exit(64);
}
const DURATION_S = int('BENCH_DURATION_S', 10);
const WARMUP_S = int('BENCH_WARMUP_S', 2);
const CONNECTIONS = int('BENCH_CONNECTIONS', 64);
const WORKSPACES = int('BENCH_WORKSPACES', 40);
const E2E_JOBS = int('BENCH_E2E_JOBS', 2000);
/** BENCH_PHASES=a or b runs only that scenario. */
const PHASES = process.env.BENCH_PHASES?.trim() || 'ab';

const log = (message: string) => process.stdout.write(`[bench generations] ${message}\n`);

async function admin<T>(fn: (client: pg.Client) => Promise<T>, url = baseUrl!): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function freshDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `gs_bench_${randomBytes(4).toString('hex')}`;
  await admin((c) => c.query(`create database ${name}`));
  const url = new URL(baseUrl!);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin((c) => c.query(`drop database if exists ${name} with (force)`)).then(() => undefined) };
}

async function startService(databaseUrl: string, env: Record<string, string>): Promise<ChildServer> {
  const server = startNodeServer('service', 'runtime/main.ts', await freePort(), {
    LOG_LEVEL: 'warn', DATABASE_URL: databaseUrl, OTEL_TRACES_EXPORTER: 'none', QUEUE_TIMEOUT_MS: '3600000', ...env,
    ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
  });
  try {
    await waitUntilReady(server, '/health/ready', 90_000);
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${tail(server)}`);
  }
  return server;
}

interface Workspace { id: string; cookie: string }

/** Team workspaces with credits to spare, set in the database before their actors first load them. */
async function workspaces(serviceUrl: string, databaseUrl: string, count: number): Promise<Workspace[]> {
  const made: Workspace[] = [];
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${serviceUrl}/v1/auth/signup`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: `bench-${randomBytes(6).toString('hex')}@example.com`, password: `pw-${randomBytes(12).toString('hex')}`, name: 'Bench' }),
    });
    if (res.status !== 201) throw new Error(`sign-up: ${res.status} ${await res.text()}`);
    const body = await res.json() as { workspace: { id: string } };
    made.push({ id: body.workspace.id, cookie: /gs_session=[^;]*/.exec(res.headers.get('set-cookie') ?? '')![0] });
  }
  await admin(async (c) => {
    for (const w of made) {
      await c.query(`update workspaces set plan = 'team' where id = $1`, [w.id]);
      await c.query(`insert into workspace_accounts (workspace_id, available_credits, reserved_credits, wallet_cents, reserved_wallet_cents, wallet_activated, reservations, updated_at)
        values ($1, 10000000, 0, 0, 0, false, '{}', now())`, [w.id]);
      await c.query(`insert into credit_ledger (id, workspace_id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, generation_id, reference, created_at)
        values ($1, $2, 'grant', 10000000, 0, 0, 0, null, 'bench', now())`, [`txn_bench_${randomBytes(8).toString('hex')}`, w.id]);
    }
  }, databaseUrl);
  return made;
}

interface Load { ok: number; other: Record<number, number>; latencies: number[]; seconds: number }

/** CONNECTIONS workers, each creating text jobs back to back (round robin over the workspaces) until `until`, or `limit` creates in all. */
async function createLoad(serviceUrl: string, spaces: Workspace[], durationMs: number, limit = Infinity): Promise<Load> {
  const agent = new Agent({ connections: CONNECTIONS, pipelining: 1 });
  const load: Load = { ok: 0, other: {}, latencies: [], seconds: 0 };
  let next = 0;
  const start = performance.now();
  const until = start + durationMs;
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (performance.now() < until && next < limit) {
      const w = spaces[next++ % spaces.length]!;
      const at = performance.now();
      const res = await request(`${serviceUrl}/v1/generations`, {
        dispatcher: agent, method: 'POST', headers: { 'content-type': 'application/json', cookie: w.cookie },
        body: JSON.stringify({ workspaceId: w.id, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${next}` } }),
      });
      await res.body.dump();
      if (res.statusCode === 201) {
        load.ok++;
        load.latencies.push(performance.now() - at);
      } else {
        load.other[res.statusCode] = (load.other[res.statusCode] ?? 0) + 1;
      }
    }
  }));
  load.seconds = (performance.now() - start) / 1000;
  await agent.close();
  return load;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function pgbench(databaseUrl: string): Promise<{ tps: number; latencyMs: number | undefined; output: string }> {
  await admin((c) => c.query('create table if not exists bench_rows (id bigserial primary key, workspace_id text not null, payload jsonb not null, created_at timestamptz not null default now())'), databaseUrl);
  const script = path.join(os.tmpdir(), `gs-pgbench-${randomBytes(4).toString('hex')}.sql`);
  await fs.writeFile(script, `insert into bench_rows (workspace_id, payload) values ('ws_bench', '{"prompt":"job"}');\n`);
  try {
    const { stdout } = await run('pgbench', ['-n', '-c', String(CONNECTIONS), '-j', '2', '-T', String(DURATION_S), '-f', script, databaseUrl], { maxBuffer: 1 << 20 });
    const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)?.[1] ?? /tps = ([\d.]+)/.exec(stdout)?.[1]);
    const latency = /latency average = ([\d.]+) ms/.exec(stdout)?.[1];
    return { tps, latencyMs: latency ? Number(latency) : undefined, output: stdout };
  } finally {
    await fs.rm(script, { force: true });
  }
}

async function main() {
  const results: Record<string, unknown> = { at: new Date().toISOString(), connections: CONNECTIONS, workspaces: WORKSPACES, durationS: DURATION_S, cores: os.cpus().length, loadAverage: os.loadavg() };

  // (a) durable creates vs pgbench
  if (PHASES.includes('a')) {
  const dbA = await freshDatabase();
  try {
    const service = await startService(dbA.url, { LOCAL_PROVIDER_LATENCY_MS: '600000', LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '1' });
    const spaces = await workspaces(service.url, dbA.url, WORKSPACES);
    log(`(a) warm-up ${WARMUP_S} s`);
    await createLoad(service.url, spaces, WARMUP_S * 1000);
    log(`(a) POST /v1/generations, ${CONNECTIONS} at a time, ${DURATION_S} s`);
    const creates = await createLoad(service.url, spaces, DURATION_S * 1000);
    await stopServer(service);
    log(`(a) pgbench single-row insert, ${CONNECTIONS} clients, ${DURATION_S} s`);
    const bench = await pgbench(dbA.url);
    const perSecond = creates.ok / creates.seconds;
    results.durableCreates = {
      createsPerSecond: Math.round(perSecond), p50Ms: +percentile(creates.latencies, 50).toFixed(1), p99Ms: +percentile(creates.latencies, 99).toFixed(1),
      created: creates.ok, refused: creates.other, pgbenchTps: Math.round(bench.tps), pgbenchLatencyMs: bench.latencyMs, ratio: +(perSecond / bench.tps).toFixed(2),
    };
    log(`(a) ${JSON.stringify(results.durableCreates)}`);
  } finally {
    await dbA.drop();
  }
  }

  // (b) end to end at zero provider latency
  if (PHASES.includes('b')) {
  const dbB = await freshDatabase();
  try {
    const service = await startService(dbB.url, { LOCAL_PROVIDER_LATENCY_MS: '0' });
    const spaces = await workspaces(service.url, dbB.url, WORKSPACES);
    log(`(b) ${E2E_JOBS} jobs, ${CONNECTIONS} creates at a time, until every one has succeeded`);
    const started = performance.now();
    const creates = await createLoad(service.url, spaces, 600_000, E2E_JOBS);
    let open = Infinity;
    while (open > 0 && performance.now() - started < 600_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      open = await admin(async (c) => Number((await c.query(`select count(*) as n from generations where status in ('queued', 'reserved', 'submitted', 'running')`)).rows[0].n), dbB.url);
    }
    const wall = (performance.now() - started) / 1000;
    const figures = await admin(async (c) => (await c.query(
      `select count(*) filter (where status = 'succeeded') as succeeded, count(*) as total,
              extract(epoch from max(completed_at) - min(created_at)) as seconds,
              percentile_cont(0.5) within group (order by extract(epoch from completed_at - created_at)) as p50,
              percentile_cont(0.99) within group (order by extract(epoch from completed_at - created_at)) as p99
       from generations`)).rows[0], dbB.url);
    await stopServer(service);
    results.endToEnd = {
      jobs: Number(figures.total), succeeded: Number(figures.succeeded), refused: creates.other,
      jobsPerSecond: Math.round(Number(figures.total) / Number(figures.seconds)), seconds: +Number(figures.seconds).toFixed(2), wallSeconds: +wall.toFixed(2),
      createToSucceededP50Ms: Math.round(Number(figures.p50) * 1000), createToSucceededP99Ms: Math.round(Number(figures.p99) * 1000),
    };
    log(`(b) ${JSON.stringify(results.endToEnd)}`);
  } finally {
    await dbB.drop();
  }
  }
  if (PHASES !== 'ab') return;

  const a = results.durableCreates as Record<string, number>;
  const b = results.endToEnd as Record<string, number>;
  const md = [
    `Generation scenarios on PostgreSQL (${results.at}; ${CONNECTIONS} concurrent requests, ${WORKSPACES} workspaces, ${DURATION_S} s, ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end)`,
    '',
    '| scenario | figure | p50 ms | p99 ms | compared with | ratio |',
    '| --- | ---: | ---: | ---: | --- | ---: |',
    `| (a) durable POST /v1/generations | ${a.createsPerSecond} creates/s | ${a.p50Ms} | ${a.p99Ms} | pgbench single-row insert ${a.pgbenchTps} tps | ${a.ratio} |`,
    `| (b) create → succeeded, local provider at 0 ms | ${b.jobsPerSecond} jobs/s (${b.jobs} jobs) | ${b.createToSucceededP50Ms} | ${b.createToSucceededP99Ms} | — | — |`,
    '',
  ].join('\n');
  process.stdout.write(`\n${md}\n`);
  const dir = path.join(repoRoot, 'bench', 'results');
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(path.join(dir, 'generations-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  await fs.writeFile(path.join(dir, 'generations-latest.md'), md);
}

main().then(
  async () => { await stopAll(); process.exit(0); },
  async (error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    await stopAll();
    process.exit(1);
  },
);

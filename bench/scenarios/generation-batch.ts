import { Agent, request } from 'undici';
import { round } from '../lib/load.ts';
import { scratchDatabase } from '../lib/postgres.ts';
import { processCpuSeconds } from '../lib/processes.ts';
import type { ExtraServer, LoadSummary, Scenario } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';
import { benchWorkspaces } from './generations.ts';

/** Team-plan workspaces each way of creating fills (BENCH_BATCH_WORKSPACES). */
const WORKSPACES = Number(process.env.BENCH_BATCH_WORKSPACES ?? 40);
/** Jobs created in each workspace: under the team plan's 500 unfinished, whichever way they are made. */
const JOBS_PER_WORKSPACE = 400;
const BATCH_SIZE = 100;
/** Clients of the single creates: as generation-create-postgres, enough for large group commits. */
const SINGLE_CLIENTS = Number(process.env.BENCH_CREATE_CONNECTIONS ?? 256);
/** Clients of the batches: 8 × 100 jobs in flight. */
const BATCH_CLIENTS = Number(process.env.BENCH_BATCH_CLIENTS ?? 8);
const PROMPT = 'Say hello in five words.';

interface Phase {
  jobs: number;
  requests: number;
  seconds: number;
  cpuSeconds: number | undefined;
  latenciesMs: number[];
  refused: number;
}

/**
 * Sends every request of `bodies` (each creating `jobsPer` jobs) with `clients` in flight, and counts the jobs
 * created (201 answers, or 201 items of a batch). Wall-clock time from the first request to the last answer.
 */
async function drive(
  server: ExtraServer,
  path: string,
  bodies: Array<{ key: string; body: string }>,
  clients: number,
  jobsOf: (status: number, body: any) => number,
): Promise<Phase> {
  const agent = new Agent({ connections: clients });
  const latenciesMs: number[] = [];
  let next = 0;
  let jobs = 0;
  let refused = 0;
  const cpuBefore = processCpuSeconds(server.pid);
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (next < bodies.length) {
          const { key, body } = bodies[next++]!;
          const sent = performance.now();
          const res = await request(`${server.url}${path}`, {
            method: 'POST',
            dispatcher: agent,
            body,
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          });
          const answer = await res.body.json();
          latenciesMs.push(performance.now() - sent);
          const made = jobsOf(res.statusCode, answer);
          jobs += made;
          if (made === 0 && res.statusCode !== 200) refused++;
        }
      }),
    );
  } finally {
    await agent.close();
  }
  const seconds = (performance.now() - started) / 1000;
  const cpuAfter = processCpuSeconds(server.pid);
  return {
    jobs,
    requests: bodies.length,
    seconds,
    cpuSeconds: cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore,
    latenciesMs,
    refused,
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!, 1);
}

function summary(title: string, path: string, clients: number, phase: Phase): LoadSummary {
  const sorted = [...phase.latenciesMs].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  return measuredSummary({
    title,
    url: path,
    method: 'POST',
    connections: clients,
    durationS: round(phase.seconds, 2),
    // The figure compared is jobs created per second, not requests.
    reqPerSec: round(phase.jobs / phase.seconds, 1),
    totalRequests: phase.requests,
    latencyMs: { mean: round(mean, 1), p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: percentile(sorted, 100) },
    errors: phase.refused,
    serverCpuUsPerRequest: phase.cpuSeconds === undefined ? undefined : round((phase.cpuSeconds * 1e6) / Math.max(1, phase.jobs), 1),
  });
}

/**
 * Durable creates through POST /v1/generations/batch (100 jobs a request, one actor message and one group
 * commit each) against the same jobs through POST /v1/generations one by one, same service process and
 * database, same run. Jobs are held (10-minute provider latency) so the figure is creation, not execution.
 * Each way fills WORKSPACES team-plan workspaces of its own with JOBS_PER_WORKSPACE jobs each (a workspace
 * holds 500 unfinished), the requests interleaved over the workspaces; singles first, then batches.
 * The ratio is jobs/s via batches ÷ jobs/s via single creates; the CPU figure is the service's CPU per job.
 */
export const generationBatch: Scenario = {
  name: 'generation-batch-postgres',
  description: 'durable creates/s through POST /v1/generations/batch (100 per request) vs POST /v1/generations one by one, PostgreSQL, same run',
  // A fixed number of jobs, not a duration: 80 workspaces to set up and 16,000 single creates take minutes on a busy 2-core machine.
  budgetS: 600,
  async run(ctx) {
    const db = await scratchDatabase();
    let server: ExtraServer | undefined;
    try {
      server = await ctx.startService('service (PostgreSQL, jobs held)', {
        DATABASE_URL: db.url,
        RATE_LIMIT_TEAM: '1000000',
        LOCAL_PROVIDER_LATENCY_MS: '600000',
      });
      // benchWorkspaces makes one probe job in the first workspace; it is not counted.
      const workspaces = await benchWorkspaces(server, db, 2 * WORKSPACES);
      const singleSet = workspaces.slice(0, WORKSPACES);
      const batchSet = workspaces.slice(WORKSPACES);
      const item = (n: number) => ({ mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `${PROMPT} ${n}` } });

      const singles: Array<{ key: string; body: string }> = [];
      for (let n = 0; n < JOBS_PER_WORKSPACE; n++) {
        for (const w of singleSet) singles.push({ key: w.key, body: JSON.stringify({ workspaceId: w.workspaceId, ...item(n) }) });
      }
      const batches: Array<{ key: string; body: string }> = [];
      for (let b = 0; b < JOBS_PER_WORKSPACE / BATCH_SIZE; b++) {
        for (const w of batchSet) {
          batches.push({
            key: w.key,
            body: JSON.stringify({ workspaceId: w.workspaceId, items: Array.from({ length: BATCH_SIZE }, (_, i) => item(b * BATCH_SIZE + i)) }),
          });
        }
      }
      ctx.log(`single creates: ${singles.length} jobs in ${WORKSPACES} workspaces, ${SINGLE_CLIENTS} clients`);
      const single = await drive(server, '/v1/generations', singles, SINGLE_CLIENTS, (status) => (status === 201 ? 1 : 0));
      ctx.log(`single creates: ${single.jobs} jobs in ${single.seconds.toFixed(2)} s`);
      ctx.log(`batches: ${batches.length} × ${BATCH_SIZE} jobs in ${WORKSPACES} workspaces, ${BATCH_CLIENTS} clients`);
      const batch = await drive(server, '/v1/generations/batch', batches, BATCH_CLIENTS, (status, body) =>
        status === 200 ? (body as { created: number }).created : 0,
      );
      ctx.log(`batches: ${batch.jobs} jobs in ${batch.seconds.toFixed(2)} s`);

      const { rows } = await db.query<{ n: string }>('select count(*) as n from generations where workspace_id = any($1)', [
        batchSet.map((w) => w.workspaceId),
      ]);
      const committed = Number(rows[0]!.n);
      if (committed < batch.jobs) throw new Error(`only ${committed} generations committed for ${batch.jobs} created through batches`);
      const result = summary(`service POST /v1/generations/batch, ${BATCH_SIZE} jobs a request (PostgreSQL)`, '/v1/generations/batch', BATCH_CLIENTS, batch);
      const baseline = summary('service POST /v1/generations, one job a request (PostgreSQL)', '/v1/generations', SINGLE_CLIENTS, single);
      const cpuRatio =
        result.serverCpuUsPerRequest !== undefined && baseline.serverCpuUsPerRequest !== undefined
          ? (baseline.serverCpuUsPerRequest / result.serverCpuUsPerRequest).toFixed(2)
          : 'n/a';
      return {
        result,
        baseline,
        notes: [
          `jobs/s: ${result.reqPerSec} through batches vs ${baseline.reqPerSec} through single creates (ratio ${(result.reqPerSec / baseline.reqPerSec).toFixed(2)})`,
          `service CPU per job: ${result.serverCpuUsPerRequest} µs through batches vs ${baseline.serverCpuUsPerRequest} µs one by one (${cpuRatio}× less)`,
          `latency of one request: batch of ${BATCH_SIZE} p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms; single create p50 ${baseline.latencyMs.p50} ms, p99 ${baseline.latencyMs.p99} ms`,
          `jobs created: ${batch.jobs} of ${batches.length * BATCH_SIZE} through batches, ${single.jobs} of ${singles.length} one by one; durability check: ${committed} generations in the batch workspaces`,
          'singles run first, then batches, each on workspaces of its own; the first 50 jobs of each workspace start (and are held by the provider) during its phase, alike for both',
        ],
      };
    } finally {
      await server?.stop();
      await db.drop();
    }
  },
};

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { restartHistory, type HistoryService, type HistorySize, type RestartHistoryReport } from '../../test/fixtures/restart-history.ts';
import { scratchDatabase } from '../lib/postgres.ts';
import { freePort, startNodeServer, stopServer } from '../lib/processes.ts';
import type { BenchContext, Scenario, ScenarioOutcome } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';

/** The database of issue 21: 121,000 finished jobs, 20,000 queued, 10,000 in flight, 20,000 deliveries pending (BENCH_HISTORY_SCALE scales it). */
const SCALE = Number(process.env.BENCH_HISTORY_SCALE ?? 1);
const SIZE: HistorySize = {
  workspaces: Math.max(4, Math.round(200 * SCALE)),
  finished: Math.round(121_000 * SCALE),
  queued: Math.round(20_000 * SCALE),
  inFlight: Math.round(10_000 * SCALE),
  pendingDeliveries: Math.round(20_000 * SCALE),
};

/**
 * Restart after kill -9 on a long history (test/fixtures/restart-history.ts builds it: real sign-ups,
 * endpoints and one job per workspace through the API, multiplied by bulk SQL), against the same restart
 * on the almost empty database before the history was written: time to ready, to the first create
 * answered, RSS right after ready and of the process killed, how soon the jobs in flight are handed over
 * again, and the time until every job has ended and every pending delivery arrived.
 */
async function run(ctx: BenchContext, postgres: boolean): Promise<ScenarioOutcome> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-history-'));
  const db = postgres ? await scratchDatabase() : undefined;
  try {
    const start = async (latencyMs: number): Promise<HistoryService> => {
      const server = startNodeServer(`restart-history service${postgres ? ' (PostgreSQL)' : ''}`, 'app/main.ts', await freePort(), {
        LOG_LEVEL: 'warn',
        OTEL_TRACES_EXPORTER: 'none',
        DATA_DIR: dataDir,
        DATABASE_URL: db?.url ?? '',
        REDIS_URL: '',
        ALLOW_PRIVATE_EGRESS: 'true',
        LOCAL_PROVIDER_LATENCY_MS: String(latencyMs),
        RATE_LIMIT_TEAM: '1000000',
        RATE_LIMIT_FREE: '1000000',
        SHUTDOWN_TIMEOUT_MS: '30000',
        QUEUE_TIMEOUT_MS: String(6 * 3_600_000),
      });
      return {
        url: server.url,
        pid: server.pid,
        async kill() {
          server.child.kill('SIGKILL');
          await server.exited;
        },
        stop: () => stopServer(server, 40_000),
      };
    };
    const report = await restartHistory({
      start,
      storage: { databaseUrl: db?.url, dataDir },
      size: SIZE,
      settleTimeoutMs: 900_000,
      log: (message) => ctx.log(`restart-history: ${message}`),
    });
    ctx.log(`restart-history: ${JSON.stringify(report)}`);
    return outcome(report, postgres);
  } finally {
    await db?.drop();
    await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

function outcome(r: RestartHistoryReport, postgres: boolean): ScenarioOutcome {
  const defects = r.stuck + r.openReservations + r.undelivered + r.notDeliveredInDb + r.moneyProblems.length;
  const summary = (title: string, ms: number) =>
    measuredSummary({
      title,
      url: 'GET /health/ready',
      method: 'GET',
      connections: 1,
      durationS: ms / 1000,
      reqPerSec: ms > 0 ? Math.round(100_000 / ms) / 100 : 0,
      totalRequests: 1,
      errors: 0,
    });
  const { size, empty, full } = r;
  return {
    result: {
      ...summary(
        `restart after kill -9 on ${size.finished} finished, ${size.queued} queued, ${size.inFlight} in flight, ${size.pendingDeliveries} deliveries pending${postgres ? ' (PostgreSQL)' : ' (PGlite on disk)'}: s to ready`,
        full.readyMs,
      ),
      errors: defects,
    },
    baseline: summary('the same restart on the almost empty database', empty.readyMs),
    ratio: Math.round((full.readyMs / empty.readyMs) * 100) / 100,
    target: 1.9,
    targetAtMost: true,
    notes: [
      `time to ready ${(full.readyMs / 1000).toFixed(1)} s (almost empty: ${(empty.readyMs / 1000).toFixed(1)} s); first create answered ${full.firstCreateMs} ms after ready (almost empty: ${empty.firstCreateMs} ms)`,
      `RSS right after ready ${full.rssAfterReadyMiB} MiB (almost empty: ${empty.rssAfterReadyMiB} MiB); the process killed, after it ran 3 s on the history: ${r.rssBeforeKillMiB} MiB; ratio ${(full.rssAfterReadyMiB / Math.max(1, r.rssBeforeKillMiB)).toFixed(2)}`,
      `jobs in flight at the kill handed over again (or ended) 1 s after ready: ~${full.resumedWithin1s} of ${size.inFlight}; every job ended and every delivery arrived ${r.settledS} s after ready`,
      `defects: jobs not ended ${r.stuck}, reservations open ${r.openReservations}, deliveries never received ${r.undelivered}, not delivered in the database ${r.notDeliveredInDb}, books ${r.moneyProblems.length === 0 ? 'agree' : r.moneyProblems.slice(0, 3).join('; ')}`,
    ],
  };
}

export const restartHistoryPglite: Scenario = {
  name: 'restart-history',
  description:
    'restart after kill -9 on a long history (finished, queued, in flight, deliveries pending), PGlite on disk: time to ready vs an almost empty database, RSS, resumption',
  budgetS: 1_800,
  run: (ctx) => run(ctx, false),
};

export const restartHistoryPostgres: Scenario = {
  name: 'restart-history-postgres',
  description: 'the same on PostgreSQL (a scratch database)',
  budgetS: 1_800,
  run: (ctx) => run(ctx, true),
};

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { crashLoop, type CrashLoopReport, type CrashService } from '../../test/fixtures/crash-loop.ts';
import { scratchDatabase } from '../lib/postgres.ts';
import { freePort, startNodeServer, stopServer, waitUntilReady } from '../lib/processes.ts';
import type { BenchContext, Scenario, ScenarioOutcome } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';

/** Kills of one run (BENCH_CRASH_KILLS); each cycle acknowledges ACKS_PER_CYCLE creates before its kill -9. */
const KILLS = Number(process.env.BENCH_CRASH_KILLS ?? 10);
const ACKS_PER_CYCLE = 30;
/** Free-plan workspaces (100 credits, 2 jobs at once, 20 unfinished each): enough credits for every cycle's jobs. */
const WORKSPACES = Math.max(4, Math.ceil(((KILLS + 1) * ACKS_PER_CYCLE) / 60));

/**
 * The longer form of the fault test test/generations/crash-loop.test.ts: the service (app/main.ts)
 * killed with -9 KILLS times under 8 create loops (Idempotency-Key, one create in 9 cancelled, 10 % of jobs
 * failed by the local provider, 300 ms per job), with a webhook endpoint per workspace, restarted on the
 * same data each time; then the audit through the API and the database.
 */
async function run(ctx: BenchContext, postgres: boolean): Promise<ScenarioOutcome> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-crash-'));
  const db = postgres ? await scratchDatabase() : undefined;
  try {
    const start = async (): Promise<CrashService> => {
      const server = startNodeServer(`crash-loop service${postgres ? ' (PostgreSQL)' : ''}`, 'app/main.ts', await freePort(), {
        LOG_LEVEL: 'warn',
        OTEL_TRACES_EXPORTER: 'none',
        DATA_DIR: dataDir,
        DATABASE_URL: db?.url ?? '',
        REDIS_URL: '',
        ALLOW_PRIVATE_EGRESS: 'true',
        LOCAL_PROVIDER_LATENCY_MS: '300',
        LOCAL_PROVIDER_FAILURE_PERCENT: '10',
        RATE_LIMIT_FREE: '1000000',
        SHUTDOWN_TIMEOUT_MS: '30000',
      });
      await waitUntilReady(server, '/health/ready', 120_000);
      return {
        url: server.url,
        async kill() {
          server.child.kill('SIGKILL');
          await server.exited;
        },
        stop: () => stopServer(server, 40_000),
      };
    };
    const report = await crashLoop({
      start,
      storage: { databaseUrl: db?.url, dataDir },
      kills: KILLS,
      workspaces: WORKSPACES,
      clients: 8,
      acksPerCycle: ACKS_PER_CYCLE,
      cancelEvery: 9,
      settleTimeoutMs: 120_000,
      log: (message) => ctx.log(`crash-loop: ${message}`),
    });
    ctx.log(`crash-loop: ${JSON.stringify(report)}`);
    return outcome(report, postgres);
  } finally {
    await db?.drop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

function outcome(r: CrashLoopReport, postgres: boolean): ScenarioOutcome {
  const defects =
    r.lost + r.stuck + r.duplicateCharges + r.duplicateJobs + r.duplicateEvents + r.missingEvents + r.undelivered + r.wrongEvents + r.moneyProblems.length;
  return {
    result: measuredSummary({
      title: `kill -9 ×${r.kills} under creates${postgres ? ' (PostgreSQL)' : ' (PGlite on disk)'}: acknowledged jobs`,
      url: 'POST /v1/generations',
      method: 'POST',
      connections: 8,
      durationS: r.seconds,
      reqPerSec: r.seconds > 0 ? Math.round((r.acknowledged / r.seconds) * 100) / 100 : 0,
      totalRequests: r.acknowledged,
      errors: defects,
    }),
    notes: [
      `kills survived ${r.kills}, jobs acknowledged ${r.acknowledged} (${r.generations} in the database: ${Object.entries(r.byStatus)
        .map(([s, n]) => `${s} ${n}`)
        .join(', ')}), stuck ${r.stuck}, lost ${r.lost}`,
      `duplicates: charges ${r.duplicateCharges}, jobs per Idempotency-Key ${r.duplicateJobs}, events ${r.duplicateEvents}, deliveries received again ${r.duplicateDeliveries} (at least once)`,
      `resubmitted after a kill ${r.resumed}, failed: ${
        Object.entries(r.failedBy)
          .map(([c, n]) => `${c} ${n}`)
          .join(', ') || 'none'
      }; creates cut off by a kill ${r.cutOff} (sent again), refused ${r.refused}`,
      `events missing ${r.missingEvents}, not recorded delivered ${r.undelivered}, wrong ${r.wrongEvents}; books: ${r.moneyProblems.length === 0 ? 'balance = ledger sum = grants - captures, nothing reserved' : r.moneyProblems.slice(0, 5).join('; ')}`,
    ],
  };
}

const budgetS = 120 + KILLS * 60;

export const crashLoopPglite: Scenario = {
  name: 'crash-loop',
  description: `the service killed with -9 ${KILLS} times under concurrent creates with webhooks, PGlite on disk: kills survived, jobs, stuck, lost, duplicates`,
  budgetS,
  run: (ctx) => run(ctx, false),
};

export const crashLoopPostgres: Scenario = {
  name: 'crash-loop-postgres',
  description: `the same on PostgreSQL (a scratch database)`,
  budgetS,
  run: (ctx) => run(ctx, true),
};

import { randomBytes } from 'node:crypto';
import t from 'tap';
import { durableStorage } from '../helpers/database.ts';
import { startNode } from '../fixtures/child.ts';
import { restartHistory, type HistoryService } from '../fixtures/restart-history.ts';

/**
 * A restart after kill -9 on a database with history: thousands of finished jobs and their delivered
 * events, jobs queued and jobs in flight (held by a slow provider until the kill), webhook deliveries
 * pending. Start-up reads only what is unfinished; everything unfinished must still resume: every job
 * ends, every reservation is settled, every pending delivery is made (at least once). PGlite on disk, or
 * a fresh PostgreSQL database (and Redis) when TEST_DATABASE_URL (and TEST_REDIS_URL) are set. The bench
 * scenario `restart-history` is the larger form of it, with the timings.
 */
const { dataDir, postgres } = await durableStorage(t, 'gs-restart-history-');
const redisPrefix = `gs-test-history-${randomBytes(4).toString('hex')}:`;

async function start(latencyMs: number): Promise<HistoryService> {
  const child = startNode(t, 'test/fixtures/serve.ts', {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    DATABASE_URL: postgres?.url,
    REDIS_URL: postgres ? process.env.TEST_REDIS_URL : undefined,
    REDIS_KEY_PREFIX: redisPrefix,
    ALLOW_PRIVATE_EGRESS: 'true',
    LOCAL_PROVIDER_LATENCY_MS: String(latencyMs),
    RATE_LIMIT_TEAM: '1000000',
    RATE_LIMIT_FREE: '1000000',
    SHUTDOWN_TIMEOUT_MS: '30000',
    QUEUE_TIMEOUT_MS: String(6 * 3_600_000),
  });
  const url = (await child.line(/^listening (http:\/\/\S+)$/, 120_000))[1]!;
  return {
    url,
    pid: child.proc.pid!,
    async kill() {
      child.proc.kill('SIGKILL');
      await child.exited;
    },
    async stop() {
      child.proc.kill('SIGTERM');
      const exited = await child.exited;
      if (exited.code !== 0) throw new Error(`graceful stop: ${JSON.stringify(exited)}\n${child.stderr()}`);
    },
  };
}

t.test('after kill -9 on a long history, every queued and in-flight job ends, every reservation is settled, every pending delivery is made', async (t) => {
  const size = { workspaces: 6, finished: 3_000, queued: 600, inFlight: 180, pendingDeliveries: 600 };
  const report = await restartHistory({
    start,
    storage: { databaseUrl: postgres?.url, dataDir },
    size,
    settleTimeoutMs: 240_000,
    log: (message) => t.comment(message),
  });
  t.comment(JSON.stringify(report));
  t.equal(report.stuck, 0, 'no job is left unfinished');
  t.equal(report.openReservations, 0, 'every reservation is captured or released');
  t.same(report.moneyProblems, [], 'balance = ledger sum, nothing reserved');
  t.equal(report.undelivered, 0, 'every pending delivery and every new event reached the receiver at least once');
  t.equal(report.notDeliveredInDb, 0, 'and is recorded as delivered');
});

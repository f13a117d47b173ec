import t from 'tap';
import { durableStorage } from '../helpers/database.ts';
import { startNode } from '../fixtures/child.ts';
import { crashLoop, type CrashService } from '../fixtures/crash-loop.ts';

/**
 * The fault test: the real service killed with -9 while clients create jobs and webhooks are subscribed,
 * twice, then restarted on the same data (PGlite on disk, or a fresh PostgreSQL database when
 * TEST_DATABASE_URL is set). Nothing may be stranded: every acknowledged job exists and ends, the books
 * balance with nothing reserved, and every end reaches its webhook at least once. The bench scenario
 * `crash-loop` is the longer form of it.
 */
const { dataDir, postgres } = await durableStorage(t, 'gs-crash-loop-');

async function start(): Promise<CrashService> {
  const child = startNode(t, 'test/fixtures/serve.ts', {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    DATABASE_URL: postgres?.url,
    ALLOW_PRIVATE_EGRESS: 'true',
    LOCAL_PROVIDER_LATENCY_MS: '300',
    LOCAL_PROVIDER_FAILURE_PERCENT: '10',
    RATE_LIMIT_FREE: '1000000',
    SHUTDOWN_TIMEOUT_MS: '30000',
  });
  const url = (await child.line(/^listening (http:\/\/\S+)$/, 120_000))[1]!;
  return {
    url,
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

t.test('kill -9 under concurrent creates, twice: nothing lost, stuck or charged twice, every end delivered', async (t) => {
  const report = await crashLoop({
    start,
    storage: { databaseUrl: postgres?.url, dataDir },
    kills: 2,
    workspaces: 3,
    clients: 6,
    acksPerCycle: 20,
    cancelEvery: 9,
    settleTimeoutMs: 60_000,
    log: (message) => t.comment(message),
  });
  t.comment(JSON.stringify(report));
  t.equal(report.kills, 2, 'two kills survived');
  t.ok(report.acknowledged >= 40, `jobs were acknowledged before each kill (${report.acknowledged})`);
  t.ok(report.resumed > 0, `jobs in flight at a kill were handed to their provider again (${report.resumed})`);
  t.same(
    Object.keys(report.failedBy).filter((code) => code !== 'provider_error'),
    [],
    "no job failed for the crash: only the provider's simulated failures",
  );
  t.equal(report.lost, 0, 'every acknowledged job exists, in the database and through the API');
  t.equal(report.stuck, 0, 'no job is left unfinished');
  t.equal(report.duplicateCharges, 0, 'no job is captured twice');
  t.equal(report.duplicateJobs, 0, 'no Idempotency-Key made two jobs');
  t.same(report.moneyProblems, [], 'balance = ledger sum = grants - captures, nothing reserved, one settlement per job');
  t.equal(report.missingEvents, 0, "every finished job's event reached its webhook at least once");
  t.equal(report.undelivered, 0, 'and its delivery is recorded as delivered');
  t.equal(report.duplicateEvents, 0, 'one event per job (deliveries may repeat)');
  t.equal(report.wrongEvents, 0, "each event names the job's final status");
  t.equal(
    report.generations,
    Object.values(report.byStatus).reduce((a, b) => a + b, 0),
  );
});

// The workers of a peer job system for the `peers` scenario (bench/scenarios/peers.ts), in a process of
// their own as the service is: PEER_SYSTEM picks the library and its settings, PEER_DATABASE_URL or
// PEER_REDIS_URL (+ PEER_PREFIX) its store. Each job's work is nothing (the handler returns at once).
// Answers GET /health/ready with 200 on PORT once its workers run; stops them on SIGTERM and exits.
import http from 'node:http';

const system = process.env.PEER_SYSTEM ?? '';
const host = process.env.HOST ?? '127.0.0.1';
const port = Number(process.env.PORT ?? 0);
export const PEER_QUEUE = 'bench-noop';

type Stop = () => Promise<void>;

async function pgBoss(): Promise<Stop> {
  const { default: PgBoss } = await import('pg-boss');
  const workers = Number(process.env.PEER_PGBOSS_WORKERS ?? 4);
  const batchSize = Number(process.env.PEER_PGBOSS_BATCH ?? 500);
  const boss = new PgBoss({ connectionString: process.env.PEER_DATABASE_URL, max: workers + 2, schedule: false, supervise: false });
  boss.on('error', (error) => process.stderr.write(`pg-boss: ${error.message}\n`));
  await boss.start();
  await boss.createQueue(PEER_QUEUE);
  // Each work() adds a polling worker; batchSize jobs per fetch, completed together when the handler returns.
  for (let i = 0; i < workers; i++) {
    await boss.work(PEER_QUEUE, { batchSize, pollingIntervalSeconds: 0.5 }, async () => {});
  }
  return () => boss.stop({ graceful: true, wait: true, timeout: 5_000 });
}

async function graphile(fast: boolean): Promise<Stop> {
  const { run, Logger } = await import('graphile-worker');
  const logger = new Logger(() => (level, message) => {
    if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
  });
  const runner = await run({
    connectionString: process.env.PEER_DATABASE_URL,
    taskList: { [PEER_QUEUE]: async () => {} },
    logger,
    noHandleSignals: true,
    // The settings of its "Performance" page (concurrency 24, pool 25, local queue, batched completions); else its defaults.
    ...(fast ? { concurrency: 24, maxPoolSize: 25, preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } } } : {}),
  });
  return () => runner.stop();
}

async function bullmq(): Promise<Stop> {
  const { Worker } = await import('bullmq');
  const url = new URL(process.env.PEER_REDIS_URL ?? 'redis://127.0.0.1:6379');
  const concurrency = Number(process.env.PEER_BULLMQ_CONCURRENCY ?? 50);
  const worker = new Worker(PEER_QUEUE, async () => {}, {
    connection: { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null },
    prefix: process.env.PEER_PREFIX ?? 'bull',
    concurrency,
  });
  worker.on('error', (error) => process.stderr.write(`bullmq: ${error.message}\n`));
  await worker.waitUntilReady();
  return () => worker.close();
}

const starters: Record<string, () => Promise<Stop>> = {
  'pg-boss': pgBoss,
  'graphile-worker': () => graphile(false),
  'graphile-worker-fast': () => graphile(true),
  bullmq,
};

const start = starters[system];
if (!start) {
  process.stderr.write(`peer-worker: unknown PEER_SYSTEM ${JSON.stringify(system)}\n`);
  process.exit(2);
}
const stop = await start();
const server = http.createServer((req, res) => {
  res.writeHead(req.url === '/health/ready' ? 200 : 404, { 'content-type': 'text/plain' }).end('ok');
});
server.listen(port, host);
let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  server.close();
  stop().then(
    () => process.exit(0),
    (error) => {
      process.stderr.write(`peer-worker: ${(error as Error).message}\n`);
      process.exit(1);
    },
  );
});

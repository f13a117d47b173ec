import type { Test } from 'tap';
import { openDatabase } from '../../persistence/database.ts';
import type { TestServer } from '../helpers/server.ts';
import { startNode } from '../fixtures/child.ts';
import { httpClient } from '../generations/flow.ts';

/** Where a provider crash test keeps what must survive kill -9 (test/helpers/database.ts durableStorage). */
export interface DurableStorage {
  dataDir: string;
  postgres: { url: string } | undefined;
}

/**
 * A service process on the test's durable storage and catalog, with its provider's settings in `env`; a
 * `redisPrefix` gives it the test Redis (when TEST_REDIS_URL is set) under that prefix. Each call is one
 * process: kill it, call again, and the next one starts on the same data.
 */
export async function serveDurable(
  t: Test,
  storage: DurableStorage,
  catalogFile: string,
  env: Record<string, string | undefined>,
  redisPrefix?: string,
): Promise<{ child: ReturnType<typeof startNode>; url: string; client: TestServer }> {
  const redis = redisPrefix !== undefined && process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: redisPrefix } : {};
  const child = startNode(t, 'test/fixtures/serve.ts', {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: storage.dataDir,
    DATABASE_URL: storage.postgres?.url,
    SHUTDOWN_TIMEOUT_MS: '30000',
    CATALOG_FILE: catalogFile,
    ALLOW_PRIVATE_EGRESS: 'true',
    PROVIDER_REQUEST_TIMEOUT_MS: '60000',
    ...redis,
    ...env,
  });
  const url = (await child.line(/^listening (http:\/\/\S+)$/))[1]!;
  return { child, url, client: httpClient(url) as TestServer };
}

/** Runs `fn` with a query function on the test's database, opened for it alone and closed after. */
export async function withDatabase<T>(storage: DurableStorage, fn: (query: <R>(sql: string, params: unknown[]) => Promise<R[]>) => Promise<T>): Promise<T> {
  const db = await openDatabase({ databaseUrl: storage.postgres?.url, dataDir: storage.dataDir });
  try {
    return await fn(<R>(sql: string, params: unknown[]) => db.em().execute<R[]>(sql, params));
  } finally {
    await db.close();
  }
}

/** A held answer of a provider's fake, and how long before the kill it is to leave. */
export interface TimedAnswer {
  delayMs: number;
  send: () => void;
}

/**
 * Sends held answers so that each leaves its `delayMs` before one kill -9 of `child` (the longest first),
 * then kills it and waits for its end: one process covers every delay of a round. The delays are as precise
 * as the event loop's timers (a millisecond or so); what a test asserts never depends on them.
 */
export async function answerThenKill(child: ReturnType<typeof startNode>, answers: TimedAnswer[]): Promise<void> {
  const last = Math.max(0, ...answers.map((answer) => answer.delayMs));
  const start = performance.now();
  const until = (at: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, start + at - performance.now())));
  for (const answer of [...answers].sort((a, b) => b.delayMs - a.delayMs)) {
    await until(last - answer.delayMs);
    answer.send();
  }
  await until(last);
  child.proc.kill('SIGKILL');
  await child.exited;
}

/** The kill delays of a sweep in rounds of at most `size` jobs (a round's jobs run at once: the plan's limit bounds it). */
export function roundsOf(delays: number[], size: number): number[][] {
  const rounds: number[][] = [];
  for (let i = 0; i < delays.length; i += size) rounds.push(delays.slice(i, i + size));
  return rounds;
}

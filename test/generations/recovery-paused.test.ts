import { spawn } from 'node:child_process';
import t from 'tap';
import { openDatabase } from '../../persistence/database.ts';
import { writeGenerationPaused } from '../../runtime/switches.ts';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import type { TestServer } from '../helpers/server.ts';
import { CHILD_NODE_FLAGS, ROOT, startNode, type Child } from '../fixtures/child.ts';
import { createGeneration, getGeneration, httpClient, isTerminal, ledgerByGeneration, moneyOf, waitFor, type Gen } from './flow.ts';
import { cameTrue, eventually, NotMetError } from '../helpers/eventually.ts';

/**
 * kill -9 with jobs in flight, then a restart while the emergency stop is on: the jobs in flight at the crash
 * must not reach their provider until the stop is lifted, as queued jobs do not.
 */
const { dataDir, postgres } = await durableStorage(t, 'gs-crash-paused-');
const databaseEnv: Record<string, string> = postgres ? { DATABASE_URL: postgres.url } : { DATA_DIR: dataDir };

function serve(latencyMs: number, logLevel = 'warn') {
  const child = startNode(t, 'test/fixtures/serve.ts', {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: logLevel,
    DATA_DIR: dataDir,
    DATABASE_URL: postgres?.url,
    LOCAL_PROVIDER_LATENCY_MS: String(latencyMs),
    SHUTDOWN_TIMEOUT_MS: '30000',
  });
  return child.line(/^listening (http:\/\/\S+)$/).then((m) => ({ child, url: m[1]!, client: httpClient(m[1]!) }));
}

/** The database while no server holds it (PGlite on disk admits one process at a time). */
async function withDatabase<T>(fn: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>): Promise<T> {
  const db = await openDatabase({ databaseUrl: postgres?.url, dataDir });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** `npm run ops -- <args>`: on PGlite it reaches the running server through its mailbox, on Postgres it writes the row. */
function ops(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [...CHILD_NODE_FLAGS, '--import', './test/loader/register.mjs', 'app/ops.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'silent', ...databaseEnv },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stderr })));
}

const resubmission = (g: Gen) => g.timeline.find((e) => e.detail?.startsWith('resubmitted after a restart'));

/** The server's log lines (JSON) that say a job in flight at the restart waits for the emergency stop. */
function heldIds(child: Child): Set<string> {
  const ids = new Set<string>();
  for (const line of child.lines) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg?: string; generationId?: string };
    if (entry.msg?.includes('waits for the emergency stop') && entry.generationId) ids.add(entry.generationId);
  }
  return ids;
}

t.test(
  'a job in flight at a crash, recovered while the emergency stop is on, waits for the stop to be lifted before it goes to its provider again',
  async (t) => {
    // Ten minutes of provider latency: the jobs that start stay in flight until the kill.
    const first = await serve(600_000);
    const client = first.client as TestServer;
    const user = await signUp(client);
    const { key } = await createKey(client, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
    // The free plan runs two jobs at a time: two go in flight, one waits in the queue.
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await createGeneration(client, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${i}` } });
      t.equal(created.status, 201, created.status === 201 ? `job ${i} created` : JSON.stringify(created.body));
      ids.push(created.body.id);
    }
    const inFlight = [ids[0]!, ids[1]!];
    for (const id of inFlight) await waitFor(client, key, user.workspaceId, id, (g) => g.status === 'submitted', 'submitted');

    first.child.proc.kill('SIGKILL');
    t.same(await first.child.exited, { code: null, signal: 'SIGKILL' });
    // While the service is down the operator turns the emergency stop on.
    await withDatabase((db) => writeGenerationPaused(db, true, 'provider outage', Date.now()));

    const second = await serve(0, 'info');
    const again = second.client;
    const ready = await waitReady(second.url);
    t.ok(ready, 'the restarted service is ready (its recovery ran)');

    // Each job in flight at the crash is held: its generation actor says so once it has handled its recovery.
    // The loop reads only the server's log: polling GET here would spend the key's 60 requests a minute. A job handed
    // to its provider before the lift would carry a resubmission entry in its timeline, which the checks below read.
    await eventually(() => inFlight.every((id) => heldIds(second.child).has(id)), { timeoutMs: 60_000, everyMs: 50 }).catch((error) => {
      throw error instanceof NotMetError ? new NotMetError(`the jobs in flight were never held; held: ${[...heldIds(second.child)].join(', ')}`) : error;
    });
    for (const id of ids) {
      const g = await getGeneration(again, key, user.workspaceId, id);
      t.equal(g.status, id === ids[2] ? 'queued' : 'submitted', `${id} waits while the stop is on`);
      t.notOk(resubmission(g), `${id} was not handed to its provider again`);
    }

    const liftedAt = Date.now();
    const resumed = await ops(['resume']);
    t.equal(resumed.code, 0, resumed.stderr);
    for (const id of ids) {
      const g = await waitFor(again, key, user.workspaceId, id, isTerminal, 'a terminal state');
      t.equal(g.status, 'succeeded', `${id} ran once the stop was lifted`);
      if (id === ids[2]) continue;
      t.same(
        g.timeline.map((e) => e.status),
        ['queued', 'reserved', 'submitted', 'submitted', 'running', 'succeeded'],
      );
      const entry = resubmission(g)!;
      t.equal(entry.detail, 'resubmitted after a restart (attempt 2 of 3)');
      t.ok(Date.parse(entry.at) >= liftedAt, `${id} was handed to its provider again after the stop was lifted (${entry.at})`);
    }

    second.child.proc.kill('SIGTERM');
    t.same(await second.child.exited, { code: 0, signal: null });
    await withDatabase(async (db) => {
      const query = <R>(sql: string, params: unknown[]) => db.em().execute<R[]>(sql, params);
      t.same(
        await moneyOf(query, user.workspaceId),
        { available: 97, reserved: 0, ledgerAvailable: 97, ledgerReserved: 0, reservations: [] },
        'three captured, nothing left reserved',
      );
      const ledger = await ledgerByGeneration(query, user.workspaceId);
      for (const id of ids) t.same(ledger[id], { reserve: 1, capture: 1 }, `${id}: one reservation, one capture`);
    });
  },
);

const waitReady = (url: string): Promise<boolean> =>
  cameTrue(async () => (await fetch(`${url}/health/ready`).catch(() => undefined))?.status === 200, Date.now() + 60_000, 50);

import t from 'tap';
import { openDatabase } from '../../persistence/database.ts';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import type { TestServer } from '../helpers/server.ts';
import { startNode } from '../fixtures/child.ts';
import { createGeneration, getGeneration, httpClient, isTerminal, ledgerByGeneration, moneyOf, waitFor } from './flow.ts';

/**
 * kill -9 of the real server process with generations queued and in flight, then a restart on the same
 * data: PGlite on disk in a temp folder, or a fresh Postgres database when TEST_DATABASE_URL is set.
 */
const { dataDir, postgres } = await durableStorage(t, 'gs-crash-');

function serve(latencyMs: number) {
  const child = startNode(t, 'test/fixtures/serve.ts', {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    DATABASE_URL: postgres?.url,
    LOCAL_PROVIDER_LATENCY_MS: String(latencyMs),
    SHUTDOWN_TIMEOUT_MS: '30000',
  });
  return child.line(/^listening (http:\/\/\S+)$/).then((m) => ({ child, client: httpClient(m[1]!) }));
}

/** The database while no server holds it (PGlite on disk admits one process at a time). */
async function withDatabase<T>(fn: (query: <R>(sql: string, params: unknown[]) => Promise<R[]>) => Promise<T>): Promise<T> {
  const db = await openDatabase({ databaseUrl: postgres?.url, dataDir });
  try {
    return await fn(<R>(sql: string, params: unknown[]) => db.em().execute<R[]>(sql, params));
  } finally {
    await db.close();
  }
}

t.test(
  'after kill -9, queued jobs keep their deadline, in-flight ones are handed to their provider again and complete, past the attempt limit one fails, and no credit is captured twice or left reserved',
  async (t) => {
    // Ten minutes of provider latency: the jobs that start stay in flight until the kill.
    const first = await serve(600_000);
    const client = first.client as TestServer;
    const user = await signUp(client);
    const { key } = await createKey(client, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
    const other = await signUp(client);
    const { key: otherKey } = await createKey(client, other.cookie, other.workspaceId, ['generations.write', 'generations.read']);

    // The free plan runs two jobs at a time: two go in flight, three wait in the queue.
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await createGeneration(client, key, user.workspaceId, {
        mode: 'text_to_text',
        model: 'local/text-mini',
        params: { prompt: `job ${i}`, seed: i },
      });
      t.equal(created.status, 201, JSON.stringify(created.body));
      ids.push(created.body.id);
    }
    // Another workspace's job, in flight at the kill as well; it will have used its attempts.
    const foreign = await createGeneration(client, otherKey, other.workspaceId, {
      mode: 'text_to_image',
      model: 'local/image-fast',
      params: { prompt: 'x', numImages: 2 },
    });
    t.equal(foreign.status, 201);

    const inFlight = [ids[0]!, ids[1]!];
    const queued = [ids[2]!, ids[3]!, ids[4]!];
    for (const id of inFlight) await waitFor(client, key, user.workspaceId, id, (g) => g.status === 'submitted', 'submitted');
    await waitFor(client, otherKey, other.workspaceId, foreign.body.id, (g) => g.status === 'submitted', 'submitted');
    for (const id of queued) t.equal((await getGeneration(client, key, user.workspaceId, id)).status, 'queued', `${id} waits for a slot`);

    first.child.proc.kill('SIGKILL');
    t.same(await first.child.exited, { code: null, signal: 'SIGKILL' });

    // While the service is down: what was committed, one queued job whose deadline passes meanwhile, and
    // the other workspace's job at its last attempt (as after two earlier crashes).
    const before = await withDatabase(async (query) => {
      const money = await moneyOf(query, user.workspaceId);
      const deadlines = await query<{ id: string; queue_deadline: Date }>('select id, queue_deadline from generations where id in (?, ?, ?)', queued);
      const attempts = await query<{ id: string; attempts: number }>('select id, attempts from generations where workspace_id in (?, ?)', [
        user.workspaceId,
        other.workspaceId,
      ]);
      await query('update generations set queue_deadline = ? where id = ?', [new Date(Date.now() - 1000), ids[4]!]);
      await query('update generations set attempts = 3 where id = ?', [foreign.body.id]);
      return {
        money,
        attempts: Object.fromEntries(attempts.map((r) => [r.id, Number(r.attempts)])),
        deadlines: Object.fromEntries(deadlines.map((r) => [r.id, new Date(r.queue_deadline).toISOString()])),
      };
    });
    t.same(
      before.money,
      { available: 95, reserved: 5, ledgerAvailable: 95, ledgerReserved: 5, reservations: ids.slice().sort() },
      'five credits reserved at the kill, ledger agrees',
    );
    t.same(
      before.attempts,
      { [ids[0]!]: 1, [ids[1]!]: 1, [ids[2]!]: 0, [ids[3]!]: 0, [ids[4]!]: 0, [foreign.body.id]: 1 },
      'the attempt is counted before the provider is called',
    );

    const second = await serve(0);
    const again = second.client;
    const done = new Map<string, Awaited<ReturnType<typeof getGeneration>>>();
    for (const id of ids) done.set(id, await waitFor(again, key, user.workspaceId, id, isTerminal, 'a terminal state'));
    const foreignDone = await waitFor(again, otherKey, other.workspaceId, foreign.body.id, isTerminal, 'a terminal state');

    for (const id of inFlight) {
      const g = done.get(id)!;
      t.equal(g.status, 'succeeded', `${id} was in flight: handed to the provider again, it succeeded`);
      t.ok(g.textOutput && g.textOutput.length > 0);
      t.same(
        g.timeline.map((e) => e.status),
        ['queued', 'reserved', 'submitted', 'submitted', 'running', 'succeeded'],
      );
      t.equal(g.timeline[3]!.detail, 'resubmitted after a restart (attempt 2 of 3)');
    }
    t.equal(foreignDone.status, 'failed', 'the job past its attempt limit fails');
    t.equal(foreignDone.errorCode, 'attempts_exhausted');
    t.match(foreignDone.errorMessage, /handed to its provider 3 times \(the limit is 3\)/);
    for (const id of [ids[2]!, ids[3]!]) {
      const g = done.get(id)!;
      t.equal(g.status, 'succeeded', `${id} was queued: it ran after the restart`);
      t.ok(g.textOutput && g.textOutput.length > 0);
      t.same(
        g.timeline.map((e) => e.status),
        ['queued', 'reserved', 'submitted', 'running', 'succeeded'],
      );
      // The resumed jobs kept the plan's two slots: a queued job starts only once one of them has ended.
      const reservedAt = Date.parse(g.timeline[1]!.at);
      const firstFree = Math.min(...inFlight.map((i) => Date.parse(done.get(i)!.completedAt!)));
      t.ok(reservedAt >= firstFree, `${id} took a slot (${g.timeline[1]!.at}) only after a resumed job ended`);
    }
    const expired = done.get(ids[4]!)!;
    t.equal(expired.status, 'expired', 'a queued job whose deadline passed while the service was down expires at the restart');
    t.same(
      expired.timeline.map((e) => e.status),
      ['queued', 'expired'],
    );

    // A graceful stop, then the books, straight from the database.
    second.child.proc.kill('SIGTERM');
    t.same(await second.child.exited, { code: 0, signal: null });
    await withDatabase(async (query) => {
      const money = await moneyOf(query, user.workspaceId);
      t.same(
        money,
        { available: 96, reserved: 0, ledgerAvailable: 96, ledgerReserved: 0, reservations: [] },
        'four captured, one released, nothing left reserved',
      );
      const ledger = await ledgerByGeneration(query, user.workspaceId);
      for (const id of ids) {
        const settled = id === ids[4] ? 'release' : 'capture';
        t.same(ledger[id], { reserve: 1, [settled]: 1 }, `${id}: one reservation, one ${settled}`);
      }
      const attempts = await query<{ id: string; attempts: number }>('select id, attempts from generations where id in (?, ?, ?, ?)', ids.slice(0, 4));
      t.same(Object.fromEntries(attempts.map((r) => [r.id, Number(r.attempts)])), { [ids[0]!]: 2, [ids[1]!]: 2, [ids[2]!]: 1, [ids[3]!]: 1 });
      const otherMoney = await moneyOf(query, other.workspaceId);
      t.same(
        otherMoney,
        { available: 100, reserved: 0, ledgerAvailable: 100, ledgerReserved: 0, reservations: [] },
        'the other workspace got its credits back',
      );
      const deadlines = await query<{ id: string; queue_deadline: Date }>('select id, queue_deadline from generations where id in (?, ?)', [ids[2]!, ids[3]!]);
      for (const row of deadlines) t.equal(new Date(row.queue_deadline).toISOString(), before.deadlines[row.id], `${row.id} kept its original queue deadline`);
      const assets = await query<{ n: string }>('select count(*)::int8 as n from assets where workspace_id = ?', [other.workspaceId]);
      t.equal(Number(assets[0]!.n), 0, 'the failed image job left no assets');
    });
  },
);

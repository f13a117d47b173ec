import t, { type Test } from 'tap';
import { trace } from '@opentelemetry/api';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { openDatabase } from '../../persistence/database.ts';
import { GroupCommitWriter, type GroupCommitWriterOptions } from '../../persistence/group-commit.ts';
import { availabilityOf, isDatabaseUnreachable } from '../../persistence/availability.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { startPgProxy } from '../helpers/pg-proxy.ts';
import { eventually } from '../helpers/eventually.ts';
import { boundQuery } from '../../persistence/bound-query.ts';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';

t.test('connection-level errors are told apart from statement errors', async (t) => {
  const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });
  for (const error of [
    withCode('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'),
    withCode('ECONNRESET'),
    withCode('ETIMEDOUT'),
    withCode('57P01', 'terminating connection due to administrator command'),
    withCode('57P03', 'the database system is starting up'),
    withCode('08006'),
    new Error('Connection terminated unexpectedly'),
    new Error('Knex: Timeout acquiring a connection. The pool is probably full.'),
    new Error('Transaction query already complete, run with DEBUG=knex:tx for more info'),
    new Error('wrapped', { cause: withCode('ECONNREFUSED') }),
    new AggregateError([withCode('ECONNREFUSED')], 'all failed'),
  ])
    t.ok(isDatabaseUnreachable(error), `unreachable: ${error.message} ${(error as { code?: string }).code ?? ''}`);
  for (const error of [
    withCode('23505', 'duplicate key value violates unique constraint'),
    withCode('42601', 'syntax error'),
    withCode('40P01', 'deadlock detected'),
    new Error('generation gen_1 is not active any more'),
    'a string',
    undefined,
  ])
    t.notOk(isDatabaseUnreachable(error), `a statement's error: ${String((error as Error | undefined)?.message ?? error)}`);
});

// The rest needs a PostgreSQL server to put a proxy in front of (PGlite has no connection to lose).
if (!process.env.TEST_DATABASE_URL) {
  t.comment('the group-commit writer under a lost connection is tested in the PostgreSQL pass (TEST_DATABASE_URL)');
} else {
  const tracer = trace.getTracer('test');
  const options = (over: Partial<GroupCommitWriterOptions> = {}): GroupCommitWriterOptions => ({ windowMs: 2, maxBatch: 512, tracer, ...over });
  const fresh = await freshDatabaseUrl();
  const proxy = await startPgProxy(t, fresh.url);
  const db = await openDatabase({ databaseUrl: proxy.url, dataDir: '.data/test' });
  t.teardown(async () => {
    availabilityOf(db).close();
    await db.close();
    await fresh.drop();
  });
  let seq = 0;
  const newKind = () => `ud${++seq}`;
  const put = (kind: string, id: string) => async (em: SqlEntityManager) => {
    await em.execute(`insert into actor_snapshots (kind, id, version, state, updated_at) values (?, ?, 1, '{}'::jsonb, now())`, [kind, id]);
  };
  const ids = async (kind: string) =>
    (await db.em().execute<Array<{ id: string }>>('select id from actor_snapshots where kind = ? order by id', [kind])).map((r) => r.id);
  const until = (condition: () => boolean) => eventually(condition, { timeoutMs: 10_000 });

  /**
   * Units with a probe commit in one round trip (COMMIT sent with their statements), so a lost connection
   * leaves no transaction id to look up: the first unit's probe tells. Each unit's statement names its kind in
   * a comment, so that the statement is parsed (and seen by the proxy) whatever its connection prepared before.
   */
  const probed = (kind: string, id: string) => ({
    unit: (em: SqlEntityManager) =>
      boundQuery(em, `/* ${kind} */ insert into actor_snapshots (kind, id, version, state, updated_at) values (?, ?, 1, '{}'::jsonb, now())`, [kind, id]).then(
        () => undefined,
      ),
    options: {
      strict: true,
      probe: async (em: SqlEntityManager) => (await boundQuery(em, 'select 1 from actor_snapshots where kind = ? and id = ?', [kind, id])).length > 0,
    },
  });

  /**
   * Writes rows `rowIds` of a new kind (with probes: in one round trip) while the proxy cuts the connection
   * where `cutOf` says, then checks that every waiter was answered, each row written once, the loss noticed,
   * and no unit failed.
   */
  const writeThroughCut = async (t: Test, rowIds: string[], cutOf: (kind: string) => [RegExp, 'before' | 'after'], withProbes = false) => {
    const writer = new GroupCommitWriter(db, options());
    const kind = newKind();
    const cut = proxy.cutAt(...cutOf(kind));
    const written = Promise.all(
      rowIds.map((id) => {
        if (!withProbes) return writer.write(put(kind, id));
        const p = probed(kind, id);
        return writer.write(p.unit, p.options);
      }),
    );
    await cut;
    await t.resolves(written, 'every waiter is answered');
    t.same(await ids(kind), rowIds, 'each row once');
    t.ok(writer.stats.retries >= 1, 'the lost connection was noticed');
    t.equal(writer.stats.failedUnits, 0, 'no unit failed (applied again, the inserts would have hit their primary key)');
    await writer.close();
  };

  t.test('a COMMIT whose answer is lost after the server committed: the waiters are answered, the batch is not applied again', (t) =>
    writeThroughCut(t, ['a', 'b', 'c'], () => [/^\s*commit/i, 'after']),
  );

  t.test('a connection lost in the middle of a batch: the same batch is tried again and commits once', (t) =>
    writeThroughCut(t, ['a', 'b', 'c'], () => [/insert into actor_snapshots/i, 'before']),
  );

  // knex then runs the units on a transaction it has already marked complete: they fail with its own error.
  t.test('a connection lost at BEGIN (a dead pooled connection): the batch is tried again and commits once', (t) =>
    writeThroughCut(t, ['a', 'b'], () => [/^\s*begin/i, 'before']),
  );

  t.test('one round trip: the answer lost after the server committed; the probe finds the batch committed, and it is not applied again', (t) =>
    writeThroughCut(t, ['a', 'b', 'c'], (kind) => [new RegExp(`/\\* ${kind} \\*/`), 'after'], true),
  );

  t.test('one round trip: the connection lost before the statements reached the server; the probe finds nothing, and the batch commits once', (t) =>
    writeThroughCut(t, ['a', 'b'], (kind) => [new RegExp(`/\\* ${kind} \\*/`), 'before'], true),
  );

  t.test('one round trip: a create answered although its connection was lost after COMMIT (HTTP, PostgreSQL)', async (t) => {
    const server = await startTestServer(t, { databaseUrl: proxy.url, env: { LOCAL_PROVIDER_LATENCY_MS: '60000' } });
    const account = await signUp(server);
    const { key } = await createKey(server, account.cookie, account.workspaceId, ['generations.write', 'generations.read']);
    const body = JSON.stringify({ workspaceId: account.workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'lost answer' } });
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    // The server's first create: its statement is parsed on its connection (later ones are only bound), so the proxy
    // sees it, and cuts the connection once the server answers (COMMIT's answer comes with the statement's).
    const cut = proxy.cutAt(/alongside_0 as \(insert into generations/, 'after');
    const created = server.json<{ id: string }>('/v1/generations', { method: 'POST', headers, body });
    const res = await created;
    t.equal(res.status, 201, 'answered 201');
    t.equal(proxy.cuts > 0, true, 'a connection was cut');
    await cut;
    const rows = await db.em().execute<Array<{ n: string }>>('select count(*) as n from generations where id = ?', [res.body.id]);
    t.equal(Number(rows[0]!.n), 1, 'the generation exists once');
    const reserve = await db
      .em()
      .execute<Array<{ n: string }>>(`select count(*) as n from credit_ledger where generation_id = ? and kind = 'reserve'`, [res.body.id]);
    t.equal(Number(reserve[0]!.n), 1, 'and its reservation once');
  });

  t.test('while the database cannot be reached, writes wait instead of failing, and commit once it is back', async (t) => {
    const writer = new GroupCommitWriter(db, options());
    const availability = availabilityOf(db);
    const kind = newKind();
    proxy.down(true);
    const settled: string[] = [];
    const writes = ['a', 'b', 'c', 'd'].map((id) =>
      writer.write(put(kind, id)).then(
        () => settled.push(id),
        (error: unknown) => settled.push(`${id}: ${(error as Error).message}`),
      ),
    );
    await until(() => writer.stats.retries >= 3);
    t.ok(writer.stats.retries >= 3, 'tried again and again');
    t.equal(availability.available, false, 'the database is marked unavailable');
    t.same(settled, [], 'no waiter was answered, none was failed');
    proxy.down(false);
    await Promise.all(writes);
    t.same(settled.sort(), ['a', 'b', 'c', 'd'], 'all committed once it was back');
    t.same(await ids(kind), ['a', 'b', 'c', 'd']);
    t.equal(availability.available, true, 'and marked available again');
    await writer.close();
  });

  t.test('close gives up on a batch waiting for an unreachable database', async (t) => {
    const writer = new GroupCommitWriter(db, options());
    const kind = newKind();
    proxy.down(true);
    const written = writer.write(put(kind, 'late'));
    written.catch(() => {});
    await until(() => writer.stats.retries >= 1);
    await writer.close();
    await t.rejects(written, 'the waiter gets the error');
    proxy.down(false);
    t.same(await ids(kind), [], 'nothing was written');
  });

  t.test('HTTP: a request that finds the database unreachable answers 503 service_unavailable, not 500; readiness follows', async (t) => {
    const other = await freshDatabaseUrl();
    t.teardown(() => other.drop());
    const front = await startPgProxy(t, other.url);
    const server = await startTestServer(t, { databaseUrl: front.url });
    const user = await signUp(server);
    const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.read']);
    const read = () => server.json(`/v1/generations?workspaceId=${user.workspaceId}`, { headers: { authorization: `Bearer ${key}` } });
    t.equal((await read()).status, 200);

    front.down(true);
    t.ok(availabilityOf(server.services.db).available, 'nothing has noticed yet');
    const failed = await read();
    t.equal(failed.status, 503, 'the read that meets the lost database');
    t.equal(failed.body.error.code, 'service_unavailable');
    t.equal(failed.headers.get('retry-after'), '2');
    t.notOk(availabilityOf(server.services.db).available, 'the database is marked unavailable');
    const ready = await server.json('/health/ready');
    t.match(ready, { status: 503, body: { error: { code: 'not_ready', message: /cannot be reached/ } } });
    t.equal((await server.json('/v1')).status, 200, 'a route that needs no database still answers');

    front.down(false);
    let status = 0;
    for (let i = 0; i < 500 && status !== 200; i++) {
      status = (await read()).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    t.equal(status, 200, 'answered again once the database is back, with no restart');
    t.equal((await server.json('/health/ready')).status, 200);
    await server.stop();
  });
}

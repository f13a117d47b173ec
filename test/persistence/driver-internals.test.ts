import t from 'tap';
import { createRequire } from 'node:module';
import { Duplex } from 'node:stream';
import pg from 'pg';
import knex from 'knex';
import {
  knexClientOf,
  knexPoolOf,
  madeInTransaction,
  PG_VERSION_CHECKED,
  PipelineQuery,
  wireValues,
  type DriverResult,
} from '../../persistence/driver-internals.ts';
import { openDatabase } from '../../persistence/database.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';

/**
 * What persistence/driver-internals.ts takes from node-postgres and knex beyond their public APIs, item by item
 * (its opening comment lists them), so that an upgrade which changes one fails here, by name, and not in
 * production. pg's items need no database: the wire is a stream of this test's, and the server's answers are
 * the messages pg's client hands its active query (the PostgreSQL runs of test/persistence/direct-transaction.test.ts
 * send real pipelines); knex's transaction flag is read on a transaction of the test's database.
 */

t.test('the installed pg is the version the module was checked against', async (t) => {
  const { version } = createRequire(import.meta.url)('pg/package.json') as { version: string };
  t.equal(
    version,
    PG_VERSION_CHECKED,
    `pg is ${version}: check each item of persistence/driver-internals.ts's list against it (this file), then set PG_VERSION_CHECKED; from 8.23 its public pipelining can replace the module`,
  );
});

t.test('pg.Query has the methods the pipeline overrides and relies on, with their signatures', async (t) => {
  const proto = pg.Query.prototype as unknown as Record<string, unknown>;
  const methods: Array<[string, number]> = [
    ['submit', 1],
    ['prepare', 1],
    ['handleCommandComplete', 2],
    ['handleRowDescription', 1],
    ['handleDataRow', 1],
    ['handleReadyForQuery', 1],
    ['handleError', 2],
    ['handleEmptyQuery', 1],
  ];
  for (const [name, arity] of methods) {
    t.type(proto[name], 'function', `Query.prototype.${name}`);
    t.equal((proto[name] as (...args: unknown[]) => unknown)?.length, arity, `Query.prototype.${name} takes ${arity} argument(s)`);
  }
});

t.test('pg.Connection has the message writers the pipeline calls', async (t) => {
  const proto = pg.Connection.prototype as unknown as Record<string, unknown>;
  for (const name of ['parse', 'bind', 'describe', 'execute', 'sync']) t.type(proto[name], 'function', `Connection.prototype.${name}`);
});

t.test('pg.utils.prepareValue converts values as pg sends them', async (t) => {
  t.type((pg as unknown as { utils?: { prepareValue?: unknown } }).utils?.prepareValue, 'function', "on the module's object");
  const buffer = Buffer.from([1, 2, 3]);
  const [nothing, missing, number, flag, text, bytes, date, list, object] = wireValues([
    null,
    undefined,
    42,
    true,
    'text',
    buffer,
    new Date('2026-01-02T03:04:05.678Z'),
    [1, null, 'a"b'],
    { a: 1 },
  ]);
  t.equal(nothing, null);
  t.equal(missing, null);
  t.equal(number, '42');
  t.equal(flag, 'true');
  t.equal(text, 'text');
  t.equal(bytes, buffer, 'a Buffer as it is');
  t.match(date, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}([+-]\d\d:\d\d|Z)$/, 'a Date as a timestamp with its offset');
  t.equal(new Date(date as string).toISOString(), '2026-01-02T03:04:05.678Z', 'the same instant');
  t.equal(list, '{"1",NULL,"a\\"b"}', 'an array as a PostgreSQL array literal');
  t.equal(object, '{"a":1}', 'an object as JSON');
  const circular = { toPostgres: () => circular };
  t.throws(() => wireValues([circular]), /circular/, 'and throws what pg throws');
});

/** A connection on a stream that keeps what is written: the bytes pg's message writers put on the wire. */
function recordingConnection(): { connection: pg.Connection; types(): string[]; writes(): number } {
  const chunks: Buffer[] = [];
  let writes = 0;
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, done) {
      writes++;
      chunks.push(chunk);
      done();
    },
    writev(list, done) {
      writes++;
      for (const { chunk } of list) chunks.push(chunk as Buffer);
      done();
    },
  });
  const connection = new pg.Connection({ stream } as never);
  return {
    connection,
    writes: () => writes,
    types() {
      // Each frontend message: a type byte, then its length (which counts itself, not the type byte).
      const wire = Buffer.concat(chunks);
      const types: string[] = [];
      for (let at = 0; at < wire.length; at += 1 + wire.readInt32BE(at + 1)) types.push(String.fromCharCode(wire[at]!));
      return types;
    },
  };
}

t.test('submitted, the query writes BEGIN and each statement with the extended protocol, then one Sync, in one write', async (t) => {
  const { connection, types, writes } = recordingConnection();
  const prepared = new Map<string, string>();
  const statements = [
    { text: 'select $1::int as n', values: wireValues([1]) },
    { text: 'select $1::int as n', values: wireValues([2]) },
  ];
  const query = new PipelineQuery(true, statements, prepared, () => {});
  const error = (query as unknown as { submit(connection: unknown): Error | null }).submit(connection);
  t.equal(error, null, "pg's submit accepts it");
  await new Promise((resolve) => setImmediate(resolve));
  // BEGIN: Parse, Bind, Execute; the statement: Parse (named), Bind, Describe, Execute; again, prepared: Bind, Describe, Execute.
  t.same(types(), ['P', 'B', 'E', 'P', 'B', 'D', 'E', 'B', 'D', 'E', 'S'], 'the messages, in order');
  t.equal(writes(), 1, "corked by pg's submit: one write on the stream");
  t.equal(prepared.size, 1, 'the statement is prepared once, by name');
  t.same(query.preparedHere, ['select $1::int as n']);
});

t.test("the answers pg's client hands the query make one result per statement, BEGIN's left out", async (t) => {
  const { connection } = recordingConnection();
  let answered: { error: Error | null; result: DriverResult | DriverResult[] } | undefined;
  const statements = [
    { text: 'select $1::int as n', values: ['1'] },
    { text: 'insert into t values ($1)', values: ['2'] },
  ];
  const query = new PipelineQuery(true, statements, new Map(), (error, result) => {
    answered = { error, result };
  });
  const handlers = query as unknown as {
    submit(connection: unknown): Error | null;
    handleCommandComplete(message: object, connection: unknown): void;
    handleRowDescription(message: object): void;
    handleDataRow(message: object): void;
    handleReadyForQuery(connection: unknown): void;
  };
  handlers.submit(connection);
  // As the server answers the write: BEGIN's CommandComplete, the select's rows and CommandComplete, the insert's, ReadyForQuery.
  handlers.handleCommandComplete({ text: 'BEGIN' }, connection);
  handlers.handleRowDescription({ fields: [{ name: 'n', dataTypeID: 23, format: 'text' }] });
  handlers.handleDataRow({ fields: ['1'] });
  handlers.handleCommandComplete({ text: 'SELECT 1' }, connection);
  handlers.handleCommandComplete({ text: 'INSERT 0 1' }, connection);
  handlers.handleReadyForQuery(connection);
  t.equal(answered?.error, null);
  t.ok(Array.isArray(answered?.result), 'one result per statement');
  const [select, insert] = answered!.result as DriverResult[];
  t.same(select?.rows, [{ n: 1 }], "rows parsed by pg's type parsers");
  t.equal(select?.command, 'SELECT');
  t.equal(insert?.command, 'INSERT');
  t.equal(insert?.rowCount, 1);
});

t.test('an error the client hands the query reaches its callback', async (t) => {
  const { connection } = recordingConnection();
  let failed: Error | null = null;
  const query = new PipelineQuery(false, [{ text: 'select 1', values: [] }], new Map(), (error) => {
    failed = error;
  });
  const handlers = query as unknown as { submit(connection: unknown): Error | null; handleError(error: Error, connection: unknown): void };
  handlers.submit(connection);
  handlers.handleError(Object.assign(new Error('duplicate key'), { code: '23505' }), connection);
  t.match(failed, { code: '23505' });
});

/**
 * The direct transaction (persistence/direct-transaction.ts) also sends through the query builder's client
 * (MikroORM's knex), with methods of its own that knex does not document: held here the same way.
 */
t.test("the query builder's client has the methods a direct transaction calls", async (t) => {
  const builder = knex({ client: 'pg' });
  t.teardown(() => builder.destroy());
  const client = knexClientOf(builder as never) as unknown as Record<string, unknown> & {
    positionBindings(sql: string): string;
    prepBindings(b: unknown[]): unknown[];
  };
  const methods: Array<[string, number]> = [
    ['acquireConnection', 0],
    ['releaseConnection', 1],
    ['query', 2],
    ['prepBindings', 1],
    ['positionBindings', 1],
    ['emit', 1],
  ];
  for (const [name, arity] of methods) {
    t.type(client[name], 'function', `client.${name}`);
    t.equal((client[name] as (...args: unknown[]) => unknown)?.length, arity, `client.${name} takes ${arity} argument(s)`);
  }
  t.equal(client.positionBindings('select ?, ?'), 'select $1, $2', 'positionBindings numbers the placeholders');
  t.same(client.prepBindings([1, 'a', null]), [1, 'a', null], 'prepBindings keeps plain values');
});

t.test("the query builder's client holds a tarn pool with the counts the connection gauges read", async (t) => {
  // No connection is made: the pool starts empty (min 0) and nothing is asked of it.
  const builder = knex({ client: 'pg', connection: { host: '127.0.0.1', port: 1 }, pool: { min: 0, max: 2 } });
  t.teardown(() => builder.destroy());
  const pool = knexPoolOf(builder as never);
  t.ok(pool, 'client.pool is there');
  t.same([pool?.numUsed(), pool?.numFree(), pool?.numPendingAcquires()], [0, 0, 0], 'numUsed, numFree and numPendingAcquires answer numbers');
});

t.test("a statement bound to a knex transaction says so by its client's transacting", async (t) => {
  const fresh = await freshDatabaseUrl();
  const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' });
  t.teardown(async () => {
    await db.close();
    await fresh.drop();
  });
  const builder = db.em().getKnex();
  t.equal(madeInTransaction(builder.raw('select 1')), false, 'outside a transaction: false');
  const trx = await builder.transaction();
  try {
    t.equal(madeInTransaction(builder.raw('select 1').transacting(trx)), true, 'bound to one with .transacting(trx): true');
    t.equal(madeInTransaction(trx.raw('select 1')), true, "made on the transaction's own builder: true");
  } finally {
    await trx.rollback();
  }
});

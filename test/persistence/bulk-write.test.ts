import t from 'tap';
import { trace } from '@opentelemetry/api';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { openDatabase } from '../../persistence/database.ts';
import { BulkWrite, bulkWriteOf } from '../../persistence/bulk-write.ts';
import { GroupCommitWriter, type GroupCommitWriterOptions } from '../../persistence/group-commit.ts';
import { boundQuery } from '../../persistence/bound-query.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';

const tracer = trace.getTracer('test');
const options = (over: Partial<GroupCommitWriterOptions> = {}): GroupCommitWriterOptions => ({ windowMs: 2, maxBatch: 512, tracer, ...over });

const fresh = await freshDatabaseUrl();
const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' });
t.teardown(async () => {
  await db.close();
  await fresh.drop();
});

let seq = 0;
const newKind = () => `bw${++seq}`;

/** Inserts every row with ONE statement and counts the statements it ran. */
function inserter(kind: string) {
  const calls: number[] = [];
  const apply = async (em: SqlEntityManager, rows: string[]) => {
    calls.push(rows.length);
    await em.execute(
      `insert into actor_snapshots (kind, id, version, state, updated_at)
       select ?, r.id, 1, '{}'::jsonb, now() from jsonb_to_recordset(?::jsonb) as r(id text)`,
      [kind, JSON.stringify(rows.map((id) => ({ id })))],
    );
  };
  return { apply, calls };
}

async function ids(kind: string): Promise<string[]> {
  const rows = await db.em().execute<Array<{ id: string }>>('select id from actor_snapshots where kind = ? order by id', [kind]);
  return rows.map((r) => r.id);
}

const names = (n: number) => Array.from({ length: n }, (_, i) => `r${String(i).padStart(4, '0')}`);

t.test('rows added while a batch gathers are written by one statement, and each promise resolves after the commit', async (t) => {
  const writer = new GroupCommitWriter(db, options());
  const kind = newKind();
  const { apply, calls } = inserter(kind);
  const bulk = new BulkWrite(writer, apply);
  const all = names(20);
  await Promise.all(all.map((id) => bulk.add(id)));
  t.same(calls, [20], 'one statement for the 20 rows');
  t.equal(writer.stats.units, 1, 'one unit in the writer');
  t.same(await ids(kind), all);
  await writer.close();
});

t.test('a bad row fails alone: the others are written again on their own and commit', async (t) => {
  const writer = new GroupCommitWriter(db, options());
  const kind = newKind();
  const { apply, calls } = inserter(kind);
  const bulk = new BulkWrite(writer, apply);
  // The primary key (kind, id) refuses the second r0003.
  const rows = ['r0001', 'r0002', 'r0003', 'r0003', 'r0004'];
  const results = await Promise.allSettled(rows.map((id) => bulk.add(id)));
  const rejected = results.filter((r) => r.status === 'rejected').length;
  t.equal(rejected, 1, 'exactly one of the duplicates is refused');
  t.same(await ids(kind), ['r0001', 'r0002', 'r0003', 'r0004'], 'every other row committed');
  t.equal(calls[0], 5, 'first the shared statement');
  t.ok(
    calls.slice(1).every((n) => n === 1),
    'then each row alone',
  );
  await writer.close();
});

t.test('a gathering that reaches its threshold commits without waiting for the window', async (t) => {
  // An hour-long window: without the hurry, these writes would wait far past the test's time-out.
  const writer = new GroupCommitWriter(db, options({ windowMs: 3_600_000 }));
  const kind = newKind();
  const { apply } = inserter(kind);
  const bulk = new BulkWrite(writer, apply);
  await Promise.all(names(32).map((id) => bulk.add(id)));
  t.equal((await ids(kind)).length, 32, 'committed');
  await writer.close();
});

t.test('bulkWriteOf gives one BulkWrite per writer and statement', async (t) => {
  const a = new GroupCommitWriter(db, options());
  const b = new GroupCommitWriter(db, options());
  const { apply } = inserter(newKind());
  const other = inserter(newKind()).apply;
  t.equal(bulkWriteOf(a, apply), bulkWriteOf(a, apply));
  t.not(bulkWriteOf(a, apply), bulkWriteOf(b, apply));
  t.not(bulkWriteOf(a, apply), bulkWriteOf(a, other));
  await a.close();
  await b.close();
});

t.test('boundQuery runs in the transaction of the entity manager it is given', async (t) => {
  const writer = new GroupCommitWriter(db, options());
  let viaOrm = '';
  let viaBound = '';
  await writer.write(async (em) => {
    viaOrm = (await em.execute<Array<{ tx: string }>>('select pg_current_xact_id()::text as tx'))[0]!.tx;
    viaBound = (await boundQuery<{ tx: string }>(em, 'select pg_current_xact_id()::text as tx', []))[0]!.tx;
  });
  t.equal(viaBound, viaOrm, 'the same transaction');
  // A bound write rolled back with its transaction is not kept.
  const kind = newKind();
  await t.rejects(
    writer.write(async (em) => {
      await boundQuery(em, `insert into actor_snapshots (kind, id, version, state, updated_at) values (?, 'x', 1, '{}'::jsonb, now())`, [kind]);
      throw new Error('roll back');
    }),
  );
  t.same(await ids(kind), [], 'rolled back with the transaction');
  await writer.close();
});

t.test("addAfter: a row that must follow another kind's unit never joins a gathering queued before it", async (t) => {
  const writer = new GroupCommitWriter(db, options({ windowMs: 20 }));
  const order: string[] = [];
  const recording = (name: string) => async (_em: SqlEntityManager, rows: string[]) => {
    order.push(`${name}:${rows.join(',')}`);
  };
  const settlements = new BulkWrite<string>(writer, recording('settle'));
  const creations = new BulkWrite<string>(writer, recording('create'));
  // A creation gathering opens first; then a settlement queues behind it.
  const early = creations.addAfter('c1');
  const settled = settlements.addAfter('s1');
  t.ok(settled.position > early.position, 'gatherings are numbered in queue order');
  // A creation that may hold the slot s1 frees must not commit before s1: it starts a gathering of its own.
  const late = creations.addAfter('c2', settled.position);
  t.ok(late.position > settled.position, 'queued behind the settlement');
  // One with no such constraint joins the open gathering, the newest.
  const joined = creations.addAfter('c3');
  t.equal(joined.position, late.position, 'later rows join the newest gathering');
  await Promise.all([early.committed, settled.committed, late.committed, joined.committed]);
  t.same(order, ['create:c1', 'settle:s1', 'create:c2,c3'], 'units run in queue order');
  await writer.close();
});

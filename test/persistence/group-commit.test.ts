import t from 'tap';
import { trace } from '@opentelemetry/api';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { PGlite } from '@electric-sql/pglite';
import { openDatabase, type Database } from '../../persistence/database.ts';
import { GroupCommitWriter, WriterClosedError, type GroupCommitWriterOptions } from '../../persistence/group-commit.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { gate } from '../fixtures/counter-actor.ts';

const tracer = trace.getTracer('test');
const options = (over: Partial<GroupCommitWriterOptions> = {}): GroupCommitWriterOptions => ({ windowMs: 2, maxBatch: 512, tracer, ...over });

const fresh = await freshDatabaseUrl();
const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' });
t.teardown(async () => {
  await db.close();
  await fresh.drop();
});

let seq = 0;
/** A kind of its own for each test, so tests never see each other's rows. */
const newKind = () => `gc${++seq}`;

const INSERT = `insert into actor_snapshots (kind, id, version, state, updated_at) values (?, ?, 1, '{}'::jsonb, now())`;
const put = (kind: string, id: string) => async (em: SqlEntityManager) => {
  await em.execute(INSERT, [kind, id]);
};

async function ids(kind: string, database: Database = db): Promise<string[]> {
  const rows = await database.em().execute<Array<{ id: string }>>('select id from actor_snapshots where kind = ? order by id', [kind]);
  return rows.map((r) => r.id);
}

async function rowExists(kind: string, id: string): Promise<boolean> {
  const rows = await db.em().execute<Array<{ n: string | number }>>('select count(*) as n from actor_snapshots where kind = ? and id = ?', [kind, id]);
  return Number(rows[0]?.n) === 1;
}

const names = (n: number, prefix = 'w') => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, '0')}`);

t.test('500 concurrent writers: every row committed, in far fewer transactions than writes', async (t) => {
  const writer = new GroupCommitWriter(db, options());
  const kind = newKind();
  const all = names(500);
  // Each unit notes the transaction it ran in: units sharing one are one group commit.
  const txOf = new Map<string, string>();
  await Promise.all(
    all.map((id) =>
      writer.write(async (em) => {
        await put(kind, id)(em);
        const [row] = await em.execute<Array<{ tx: string }>>('select pg_current_xact_id()::text as tx');
        txOf.set(id, row!.tx);
      }),
    ),
  );
  t.same(await ids(kind), all, 'all 500 rows present');
  t.equal(writer.stats.units, 500);
  t.ok(writer.stats.batches < 50, `${writer.stats.batches} batches for 500 writes`);
  t.equal(new Set(txOf.values()).size, writer.stats.batches, 'one transaction per batch');
  await writer.close();
});

t.test('maxBatch caps how many units share one transaction', async (t) => {
  const writer = new GroupCommitWriter(db, options({ maxBatch: 64 }));
  const kind = newKind();
  const txOf = new Map<string, string>();
  await Promise.all(
    names(300).map((id) =>
      writer.write(async (em) => {
        await put(kind, id)(em);
        const [row] = await em.execute<Array<{ tx: string }>>('select pg_current_xact_id()::text as tx');
        txOf.set(id, row!.tx);
      }),
    ),
  );
  const sizes = new Map<string, number>();
  for (const tx of txOf.values()) sizes.set(tx, (sizes.get(tx) ?? 0) + 1);
  t.ok(Math.max(...sizes.values()) <= 64, 'no transaction holds more than maxBatch units');
  t.ok(sizes.size >= Math.ceil(300 / 64), `${sizes.size} transactions`);
  t.equal((await ids(kind)).length, 300);
  await writer.close();
});

t.test('a waiter is answered only after its commit: its row is visible elsewhere the moment it resolves', async (t) => {
  // On PostgreSQL a separate entity manager is a separate connection, which sees a row only once its
  // transaction has committed. With PGlite every entity manager shares one session, which sees its own
  // uncommitted rows: there the check is whether a write transaction is still open on that session when
  // the waiter resolves (asked with one batch only, so that no later batch can have opened one).
  const pglite = db.kind === 'pglite' ? (db.orm.config.get('driverOptions') as { connection: { pglite: () => PGlite } }).connection.pglite() : undefined;
  const visibilityCannotFail = pglite ? 'PGlite: one shared session sees rows before their commit, so visibility proves nothing there' : undefined;

  for (const maxBatch of [512, 8]) {
    const writer = new GroupCommitWriter(db, options({ maxBatch }));
    const kind = newKind();
    const checks = names(maxBatch === 512 ? 100 : 40).map((id) =>
      writer.write(put(kind, id)).then(async () => {
        let openTx: unknown = null;
        if (pglite && maxBatch === 512) {
          // First thing on resolving, straight to the session (an entity manager would queue behind the transaction).
          const res = await pglite.query<{ x: unknown }>('select pg_current_xact_id_if_assigned() as x');
          openTx = res.rows[0]?.x ?? null;
        }
        const visible = await rowExists(kind, id);
        return { id, visible, openTx };
      }),
    );
    const results = await Promise.all(checks);
    t.same(
      results.filter((r) => !r.visible).map((r) => r.id),
      [],
      `maxBatch ${maxBatch}: every waiter saw its own row from a separate entity manager`,
      { skip: visibilityCannotFail },
    );
    if (pglite && maxBatch === 512) {
      t.same(
        results.filter((r) => r.openTx !== null).map((r) => r.id),
        [],
        `maxBatch ${maxBatch}: no write transaction open on the shared session when a waiter resolved`,
      );
    }
    await writer.close();
  }
});

t.test('a unit that throws rejects only its own waiter; its partial writes roll back; the rest of its batch commits', async (t) => {
  const writer = new GroupCommitWriter(db, options());
  const kind = newKind();
  const boom = new Error('unit failed on purpose');
  const good = names(20, 'ok');
  const bad = async (em: SqlEntityManager) => {
    await put(kind, 'bad-partial')(em);
    throw boom;
  };
  const dupe = async (em: SqlEntityManager) => {
    await put(kind, 'dupe')(em);
    await put(kind, 'dupe')(em); // a primary-key violation: the database refuses this unit
  };
  const settled = await Promise.allSettled([
    ...good.slice(0, 10).map((id) => writer.write(put(kind, id))),
    writer.write(bad),
    writer.write(dupe),
    ...good.slice(10).map((id) => writer.write(put(kind, id))),
  ]);
  const statuses = settled.map((s) => s.status);
  t.same(statuses.filter((s) => s === 'rejected').length, 2);
  t.equal(settled[10]!.status, 'rejected');
  t.equal((settled[10] as PromiseRejectedResult).reason, boom, 'the throwing unit gets its own error');
  t.equal(settled[11]!.status, 'rejected', 'the unit the database refused is rejected');
  t.same(await ids(kind), good, 'every other unit committed; nothing of the failed units');
  t.equal(writer.stats.failedUnits, 2);
  await writer.close();
});

t.test('a unit that swallows a failed statement breaks the transaction: no waiter is told its write committed unless it did', async (t) => {
  const writer = new GroupCommitWriter(db, options());
  const kind = newKind();
  const good = names(10, 'ok');
  // Catching the error leaves the transaction aborted; Postgres then answers COMMIT with a silent ROLLBACK.
  const breaker = async (em: SqlEntityManager) => {
    await put(kind, 'breaker')(em);
    try {
      await em.execute('select 1 / 0');
    } catch {
      // swallowed
    }
  };
  // The breaker last in its batch: every earlier unit already ran without error.
  const writes = [...good.map((id) => writer.write(put(kind, id))), writer.write(breaker)];
  const settled = await Promise.allSettled(writes);
  const present = new Set(await ids(kind));
  const lied = good.filter((id, i) => settled[i]!.status === 'fulfilled' && !present.has(id));
  t.same(lied, [], 'no waiter resolved whose row is not in the database');
  t.equal(settled.at(-1)!.status, 'rejected', 'the breaking unit is rejected');
  t.notOk(present.has('breaker'), 'and its write is not there');
  t.same([...present].sort(), good, 'the other units are committed (each on its own if need be) and resolved');
  t.ok(settled.slice(0, good.length).every((s) => s.status === 'fulfilled'));
  await writer.close();
});

t.test('when the commit cannot happen at all, no waiter is resolved', async (t) => {
  const other = await freshDatabaseUrl();
  const lost = await openDatabase({ databaseUrl: other.url, dataDir: '.data/test' });
  t.teardown(() => other.drop());
  const writer = new GroupCommitWriter(lost, options());
  const kind = newKind();
  t.equal((await Promise.allSettled([writer.write(put(kind, 'before'))]))[0]!.status, 'fulfilled');
  await lost.close();
  const settled = await Promise.allSettled(names(10).map((id) => writer.write(put(kind, id))));
  t.same(
    settled.map((s) => s.status),
    names(10).map(() => 'rejected'),
    'every waiter rejected once the database is gone',
  );
});

t.test('flush ends while other writers keep the writer busy: it waits for what was queued before it, not for a lull', async (t) => {
  const writer = new GroupCommitWriter(db, options());
  const kind = newKind();
  // Four writers that each queue their next write as soon as the previous one commits: the writer is never idle.
  // (Signalled from the writers themselves, not polled with a timer: on PGlite the commits may run without
  // yielding to timers, and a timer would fire only once the writers had stopped.)
  let busy = true;
  let background = 0;
  let twentyWritten!: () => void;
  const twenty = new Promise<void>((resolve) => {
    twentyWritten = resolve;
  });
  const chains = [0, 1, 2, 3].map(async (c) => {
    for (let i = 0; busy && background < 20_000; i++) {
      await writer.write(put(kind, `busy-${c}-${i}`));
      if (++background === 20) twentyWritten();
    }
  });
  await twenty;
  let markerDone = false;
  const marker = writer.write(put(kind, 'marker')).then(() => {
    markerDone = true;
  });
  await writer.flush();
  const stillBusy = busy && background < 20_000;
  t.ok(markerDone, 'the write queued before the flush is committed when it resolves');
  t.ok(stillBusy, `the flush resolved while the other writers were still writing (${background} background writes so far)`);
  busy = false;
  await Promise.all([marker, ...chains]);
  t.ok(await rowExists(kind, 'marker'));
  await writer.close();
});

t.test('flush waits for everything queued so far; close commits what is queued and then refuses writes', async (t) => {
  const writer = new GroupCommitWriter(db, options({ windowMs: 20 }));
  const kind = newKind();
  await writer.flush(); // nothing queued: resolves at once

  const done = new Set<string>();
  const first = names(30, 'a');
  for (const id of first) void writer.write(put(kind, id)).then(() => done.add(id));
  await writer.flush();
  await Promise.resolve();
  t.same([...done].sort(), first, 'every write queued before flush has been answered');
  t.same(await ids(kind), first, 'and committed');

  // A flush called while a batch is committing also waits for what was queued behind that batch.
  const started = gate();
  const hold = gate();
  const slow = writer.write(async (em) => {
    started.open();
    await hold.wait;
    await put(kind, 'b-slow')(em);
  });
  await started.wait; // the batch is committing, held inside its unit
  let lateDone = false;
  const late = writer.write(put(kind, 'b-late')).then(() => {
    lateDone = true;
  });
  const flushed = writer.flush();
  hold.open();
  await flushed;
  t.ok(lateDone, 'flush resolved only after the write queued behind the committing batch');
  await Promise.all([slow, late]);
  t.same(
    (await ids(kind)).filter((id) => id.startsWith('b')),
    ['b-late', 'b-slow'],
  );

  const queued = names(10, 'c').map((id) => writer.write(put(kind, id)));
  await writer.close();
  const settled = await Promise.allSettled(queued);
  t.ok(
    settled.every((s) => s.status === 'fulfilled'),
    'writes queued before close are committed',
  );
  t.same(
    (await ids(kind)).filter((id) => id.startsWith('c')),
    names(10, 'c'),
  );
  await t.rejects(writer.write(put(kind, 'after-close')), WriterClosedError);
  t.notOk(await rowExists(kind, 'after-close'));
  await writer.flush();
});

t.test('an idle writer commits at once: no timer is armed; writes queued while a commit is in flight share the next commit', async (t) => {
  const writer = new GroupCommitWriter(db, options({ windowMs: 0 }));
  const kind = newKind();
  // Counts the timers the writer arms while a write is queued (schedule runs inside write, synchronously).
  const realSetTimeout = globalThis.setTimeout;
  let timers = 0;
  const counting = ((...args: Parameters<typeof setTimeout>) => {
    timers++;
    return realSetTimeout(...args);
  }) as typeof setTimeout;
  const queue = (unit: (em: SqlEntityManager) => Promise<void>) => {
    globalThis.setTimeout = counting;
    try {
      return writer.write(unit);
    } finally {
      globalThis.setTimeout = realSetTimeout;
    }
  };

  const started = gate();
  const hold = gate();
  // Three writes of the same turn of the event loop: one batch, held inside its first unit.
  const first = [
    queue(async (em) => {
      started.open();
      await hold.wait;
      await put(kind, 'a1')(em);
    }),
    queue(put(kind, 'a2')),
    queue(put(kind, 'a3')),
  ];
  t.equal(timers, 0, 'queuing a write on an idle writer arms no timer');
  await started.wait;
  t.equal(writer.stats.batches, 0, 'the first batch is committing');
  // Two writes while that commit is in flight: they wait for it, then commit together, without a timer.
  const second = [queue(put(kind, 'b1')), queue(put(kind, 'b2'))];
  t.equal(timers, 0, 'nor does a write queued behind a commit in flight');
  hold.open();
  await Promise.all([...first, ...second]);
  t.equal(writer.stats.batches, 2, 'two commits for five writes');
  t.equal(writer.stats.lastBatchSize, 2, 'the writes queued during the first commit shared the second');
  t.same(await ids(kind), ['a1', 'a2', 'a3', 'b1', 'b2']);
  await writer.close();
});

import t from 'tap';
import { trace } from '@opentelemetry/api';
import { openDatabase } from '../../persistence/database.ts';
import { DirectTransaction, directTransactionOf } from '../../persistence/direct-transaction.ts';
import { GroupCommitWriter } from '../../persistence/group-commit.ts';
import { boundQuery } from '../../persistence/bound-query.ts';
import { noteTransactionId, notedTransactionId, TXID_COLUMN } from '../../persistence/transaction-id.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { recordDriverWrites } from '../helpers/driver-writes.ts';

const fresh = await freshDatabaseUrl();
const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' });
t.teardown(async () => {
  await db.close();
  await fresh.drop();
});

const insert = `insert into actor_snapshots (kind, id, version, state, updated_at) values (?, ?, 1, ?::jsonb, now())`;

async function idsOf(kind: string): Promise<string[]> {
  const rows = await db.em().execute<Array<{ id: string }>>('select id from actor_snapshots where kind = ? order by id', [kind]);
  return rows.map((r) => r.id);
}

/** An entity manager writing in `tx`, as the group-commit writer hands one to strict units. */
function emIn(tx: DirectTransaction) {
  const em = db.em();
  em.setTransactionContext(tx as never);
  return em;
}

t.test("em.execute and boundQuery run in the direct transaction: each sees the other's rows, others see them after COMMIT", async (t) => {
  await DirectTransaction.run(db.em().getKnex(), async (tx) => {
    const em = emIn(tx);
    t.equal(directTransactionOf(em), tx, 'the entity manager names its transaction');
    t.ok(em.isInTransaction(), 'and counts as in a transaction');
    await em.execute(insert, ['dt-commit', 'a', JSON.stringify({ n: 1 })]);
    await boundQuery(em, insert, ['dt-commit', 'b', JSON.stringify({ n: 2 })]);
    const seen = await boundQuery<{ id: string; n: number }>(em, `select id, (state->>'n')::int as n from actor_snapshots where kind = ? order by id`, [
      'dt-commit',
    ]);
    t.same(
      seen,
      [
        { id: 'a', n: 1 },
        { id: 'b', n: 2 },
      ],
      'both writes seen inside, values bound as they were given',
    );
    if (db.kind === 'postgres') t.same(await idsOf('dt-commit'), [], 'not seen by another connection before COMMIT');
  });
  t.same(await idsOf('dt-commit'), ['a', 'b'], 'committed');
});

t.test('a body that throws rolls back every statement of the transaction', async (t) => {
  await t.rejects(
    DirectTransaction.run(db.em().getKnex(), async (tx) => {
      const em = emIn(tx);
      await em.execute(insert, ['dt-rollback', 'a', '{}']);
      await boundQuery(em, insert, ['dt-rollback', 'b', '{}']);
      throw new Error('the unit changed its mind');
    }),
    { message: 'the unit changed its mind' },
  );
  t.same(await idsOf('dt-rollback'), [], 'nothing committed');
  // The pooled connection went back clean: the next transaction commits.
  await DirectTransaction.run(db.em().getKnex(), (tx) =>
    emIn(tx)
      .execute(insert, ['dt-rollback', 'c', '{}'])
      .then(() => undefined),
  );
  t.same(await idsOf('dt-rollback'), ['c'], 'and the next one on the pool commits');
});

t.test("a failed statement throws the database's own error and leaves nothing behind", async (t) => {
  await t.rejects(
    DirectTransaction.run(db.em().getKnex(), async (tx) => {
      const em = emIn(tx);
      await boundQuery(em, insert, ['dt-failed', 'a', '{}']);
      await boundQuery(em, insert, ['dt-failed', 'a', '{}']);
    }),
    { code: '23505' },
    'a unique violation, with its SQLSTATE',
  );
  t.same(await idsOf('dt-failed'), []);
});

t.test(
  'the transaction id a statement returns is noted for the transaction',
  { skip: db.kind !== 'postgres' && 'txid_current is read on PostgreSQL only' },
  async (t) => {
    await DirectTransaction.run(db.em().getKnex(), async (tx) => {
      const em = emIn(tx);
      const [row] = await boundQuery<{ txid: string }>(em, `${insert} returning ${TXID_COLUMN}`, ['dt-txid', 'a', '{}']);
      noteTransactionId(em, row!.txid);
      t.match(notedTransactionId(em), /^\d+$/);
      const [again] = await em.execute<Array<{ id: string }>>('select txid_current()::text as id');
      t.equal(notedTransactionId(em), again!.id, 'the same transaction for both statements');
    });
  },
);

t.test('the group-commit writer commits a batch of strict units in one direct transaction, and a failing batch not at all', async (t) => {
  const writer = new GroupCommitWriter(db, { windowMs: 5, maxBatch: 64, tracer: trace.getTracer('test') });
  const seenIn: Array<DirectTransaction | undefined> = [];
  const unit = (id: string) => async (em: Parameters<Parameters<GroupCommitWriter['write']>[0]>[0]) => {
    seenIn.push(directTransactionOf(em));
    await boundQuery(em, insert, ['dt-writer', id, '{}']);
  };
  await Promise.all(['a', 'b', 'c'].map((id) => writer.write(unit(id), { strict: true })));
  t.equal(seenIn.length, 3);
  t.ok(seenIn[0], 'a strict unit writes in a direct transaction');
  t.ok(
    seenIn.every((tx) => tx === seenIn[0]),
    'one transaction for the batch',
  );
  t.same(await idsOf('dt-writer'), ['a', 'b', 'c']);

  // A unit that is not strict gets the ORM's transaction.
  let ormTx: unknown;
  await writer.write(async (em) => {
    ormTx = em.getTransactionContext();
  });
  t.ok(ormTx, 'a unit that is not strict still writes in a transaction');
  t.notOk(ormTx instanceof DirectTransaction, "the ORM's own");
  await writer.close();
});

t.test(
  'on PostgreSQL BEGIN goes with the first statement: a transaction of one statement is two round trips',
  { skip: db.kind !== 'postgres' && 'PGlite runs in the process' },
  async (t) => {
    const recorded = recordDriverWrites(t);
    const rows = await DirectTransaction.run(db.em().getKnex(), (tx) =>
      boundQuery<{ id: string }>(emIn(tx), `${insert} returning id`, ['dt-pipelined', 'a', '{}']),
    );
    recorded.stop();
    const sent = recorded.writes.map((w) => w.texts[0]!);
    t.same(rows, [{ id: 'a' }], "the first statement's own rows, not BEGIN's");
    t.equal(sent.length, 2, `two round trips: ${JSON.stringify(sent.map((s) => s.slice(0, 40)))}`);
    t.match(sent[0], /^insert into actor_snapshots/, 'the statement, with BEGIN before it in the same write');
    t.equal(sent[1]!.toLowerCase(), 'commit');
    t.same(await idsOf('dt-pipelined'), ['a'], 'committed');

    // A first statement that fails: its error, nothing committed, and the connection serves the next transaction.
    await t.rejects(
      DirectTransaction.run(db.em().getKnex(), (tx) => boundQuery(emIn(tx), insert, ['dt-pipelined', 'a', '{}'])),
      { code: '23505' },
    );
    await t.rejects(
      DirectTransaction.run(db.em().getKnex(), (tx) => boundQuery(emIn(tx), 'select no_such_column from actor_snapshots', [])),
      { code: '42703' },
    );
    const again = await DirectTransaction.run(db.em().getKnex(), async (tx) => {
      await boundQuery(emIn(tx), insert, ['dt-pipelined', 'b', '{}']);
      return boundQuery<{ n: string }>(emIn(tx), 'select count(*)::text as n from actor_snapshots where kind = ?', ['dt-pipelined']);
    });
    t.same(again, [{ n: '2' }], 'the next transaction sees its own row and the committed one');
    t.same(await idsOf('dt-pipelined'), ['a', 'b']);
  },
);

t.test(
  'statements asked for together go in one round trip, in order; one that fails fails the rest and the transaction',
  { skip: db.kind !== 'postgres' && 'PGlite runs in the process' },
  async (t) => {
    const recorded = recordDriverWrites(t);
    const results = await DirectTransaction.run(db.em().getKnex(), (tx) => {
      const em = emIn(tx);
      return Promise.all([
        boundQuery<{ id: string }>(em, `${insert} returning id`, ['dt-together', 'a', JSON.stringify({ n: 1 })]),
        em.execute(insert, ['dt-together', 'b', JSON.stringify({ n: 2 })]),
        boundQuery<{ n: string }>(em, 'select count(*)::text as n from actor_snapshots where kind = ?', ['dt-together']),
        boundQuery<{ d: Date }>(em, 'select ?::timestamptz as d', [new Date('2026-01-02T03:04:05.678Z')]),
      ]);
    });
    recorded.stop();
    const sent = recorded.writes.map((w) => w.texts[0]!);
    t.same(results[0], [{ id: 'a' }], 'each statement gets its own rows');
    t.same(results[2], [{ n: '2' }], 'a statement sees the ones asked for before it: they ran in order');
    t.equal(new Date(results[3][0]!.d).toISOString(), '2026-01-02T03:04:05.678Z', 'values go to the wire as pg sends them');
    t.equal(sent.length, 2, `four statements and BEGIN in one round trip, COMMIT in another: ${JSON.stringify(sent.map((s) => s.slice(0, 30)))}`);
    t.same(await idsOf('dt-together'), ['a', 'b']);

    let outcomes: PromiseSettledResult<unknown>[] = [];
    await t.rejects(
      DirectTransaction.run(db.em().getKnex(), async (tx) => {
        const em = emIn(tx);
        outcomes = await Promise.allSettled([
          boundQuery(em, insert, ['dt-together', 'c', '{}']),
          boundQuery(em, insert, ['dt-together', 'a', '{}']),
          boundQuery(em, insert, ['dt-together', 'd', '{}']),
        ]);
      }),
      { code: '23505' },
      "a body that caught the failure still fails, with the statement's error: no COMMIT that silently rolls back",
    );
    const [c, a, d] = outcomes;
    t.equal(a?.status, 'rejected', 'the duplicate failed');
    t.equal((a as PromiseRejectedResult).reason?.code, '23505');
    t.equal(d?.status, 'rejected', 'the statement after it did not run');
    t.equal(c?.status, 'rejected', 'and the one before it, in the same write, is reported with it');
    t.same(await idsOf('dt-together'), ['a', 'b'], 'nothing of that transaction was kept');
  },
);

t.test('a body that catches a failed statement and goes on fails all the same', async (t) => {
  await t.rejects(
    DirectTransaction.run(db.em().getKnex(), async (tx) => {
      const em = emIn(tx);
      await boundQuery(em, insert, ['dt-caught', 'a', '{}']);
      await boundQuery(em, insert, ['dt-caught', 'a', '{}']).catch(() => undefined);
    }),
    { code: '23505' },
  );
  t.same(await idsOf('dt-caught'), [], 'nothing committed');
});

t.test(
  'a statement whose first Parse the server skipped (an earlier one failed) is parsed again next time',
  { skip: db.kind !== 'postgres' && 'PGlite runs in the process' },
  async (t) => {
    for (let i = 0; i < 6; i++) {
      const text = `select ?::int + ${i} as n`;
      await t.rejects(
        DirectTransaction.run(db.em().getKnex(), (tx) => {
          const em = emIn(tx);
          return Promise.all([boundQuery(em, 'select no_such_column from actor_snapshots', []), boundQuery(em, text, [1])]);
        }),
        { code: '42703' },
      );
      const rows = await DirectTransaction.run(db.em().getKnex(), (tx) => boundQuery<{ n: number }>(emIn(tx), text, [1]));
      t.same(rows, [{ n: 1 + i }], `statement ${i} runs on the connection that skipped it`);
      const again = await DirectTransaction.run(db.em().getKnex(), (tx) => boundQuery<{ n: number }>(emIn(tx), text, [2]));
      t.same(again, [{ n: 2 + i }], 'and again, prepared');
    }
  },
);

t.test(
  'commitWithStatements: COMMIT goes in the same write as the statements, and the transaction is one round trip',
  { skip: db.kind !== 'postgres' && 'PGlite runs in the process' },
  async (t) => {
    const recorded = recordDriverWrites(t);
    await DirectTransaction.run(
      db.em().getKnex(),
      (tx) => {
        const em = emIn(tx);
        return Promise.all([boundQuery(em, insert, ['dt-one-trip', 'a', '{}']), em.execute(insert, ['dt-one-trip', 'b', '{}'])]);
      },
      { commitWithStatements: true },
    );
    recorded.stop();
    const writes = recorded.writes.map((w) => w.texts);
    t.equal(writes.length, 1, `one write: ${JSON.stringify(writes)}`);
    t.same(
      writes[0]!.map((text) => text.trim().split(/\s+/)[0]!.toLowerCase()),
      ['insert', 'insert', 'commit'],
      'both statements, then COMMIT',
    );
    t.same(await idsOf('dt-one-trip'), ['a', 'b'], 'committed');
  },
);

t.test(
  'commitWithStatements: a statement that fails takes COMMIT with it; nothing is committed and the connection is clean',
  { skip: db.kind !== 'postgres' && 'PGlite runs in the process' },
  async (t) => {
    await t.rejects(
      DirectTransaction.run(
        db.em().getKnex(),
        (tx) => {
          const em = emIn(tx);
          return Promise.all([
            boundQuery(em, insert, ['dt-one-trip-fail', 'a', '{}']),
            boundQuery(em, 'select write_check(?, ?)', [false, 'refused on the server']),
          ]);
        },
        { commitWithStatements: true },
      ),
      { code: 'GSW01', message: 'refused on the server' },
    );
    t.same(await idsOf('dt-one-trip-fail'), [], 'nothing committed');
    await DirectTransaction.run(db.em().getKnex(), (tx) => boundQuery(emIn(tx), insert, ['dt-one-trip-fail', 'b', '{}']), { commitWithStatements: true });
    t.same(await idsOf('dt-one-trip-fail'), ['b'], 'the next transaction on the pool commits');
  },
);

t.test(
  'commitWithStatements: a statement asked for after COMMIT was sent is refused, and the run fails',
  { skip: db.kind !== 'postgres' && 'PGlite runs in the process' },
  async (t) => {
    let late: Promise<unknown> | undefined;
    await t.rejects(
      DirectTransaction.run(
        db.em().getKnex(),
        async (tx) => {
          const em = emIn(tx);
          await boundQuery(em, insert, ['dt-one-trip-late', 'a', '{}']);
          late = boundQuery(em, insert, ['dt-one-trip-late', 'b', '{}']);
          await late;
        },
        { commitWithStatements: true },
      ),
      { message: /committed, but its body failed/ },
    );
    await t.rejects(late!, { message: /after its transaction's COMMIT was sent/ }, 'the late statement itself is refused');
    t.same(await idsOf('dt-one-trip-late'), ['a'], 'what was asked for with COMMIT committed; the late statement never ran');
  },
);

import t from 'tap';
import { PGlite } from '@electric-sql/pglite';
import { PglitePool } from '../helpers/pglite-pool.ts';
import { CHANGES_EMPTYING_KEEPS, SMALL_MIGRATED_SCHEMA } from '../helpers/database-reset-cases.ts';

// The test suite's pool of in-memory PGlites (test/helpers/pglite-pool.ts): what a server gets back from it
// must be what a fresh boot gives, or a test would see an earlier test's data.

/** A small migrated database, dumped once: each boot loads it, as the suite's pool loads the service's. */
const image = await (async () => {
  const db = new PGlite();
  await db.exec(SMALL_MIGRATED_SCHEMA);
  const dump = await db.dumpDataDir('none');
  await db.close();
  return dump;
})();

async function boot(): Promise<PGlite> {
  return new PGlite({ loadDataDir: image });
}

t.test('a closed instance comes back emptied, its session reset, the migrations kept', async (t) => {
  const pool = new PglitePool(boot);
  const first = await pool.take();
  await first.exec(`insert into parents values (1); insert into children values (1, 1); set work_mem = '8MB'; prepare p as select 1`);
  t.equal(pool.closedByBorrower(first), false);
  await first.close();
  t.equal(first.closed, false, 'kept open');
  t.equal(pool.closedByBorrower(first), true, 'known as closed by its borrower');
  t.equal(pool.idleCount, 1);
  const again = await pool.take();
  t.equal(again, first, 'the same instance is handed out');
  t.equal(pool.closedByBorrower(again), false, 'lent again');
  t.equal(pool.idleCount, 0);
  t.same((await again.query('select (select count(*)::int from parents) as p, (select count(*)::int from children) as c')).rows, [{ p: 0, c: 0 }]);
  t.same((await again.query('select count(*)::int as n from mikro_orm_migrations')).rows, [{ n: 1 }], 'the migrations are still recorded');
  t.same((await again.query('show work_mem')).rows, [{ work_mem: '4MB' }], 'settings reset');
  t.same((await again.query('show search_path')).rows, [{ search_path: 'public' }], 'the search path PGlite starts with');
  await t.rejects(again.exec('execute p'), 'prepared statements dropped');
  await again.exec('insert into parents values (2)');
  await again.close();
  t.equal((await pool.take()).closed, false);
});

t.test('an instance whose schema a test changed is closed, not handed out again', async (t) => {
  const pool = new PglitePool(boot);
  for (const change of CHANGES_EMPTYING_KEEPS) {
    const db = await pool.take();
    await db.exec(change);
    await db.close();
    t.equal(db.closed, true, `closed after: ${change.split('\n')[0]}`);
    t.equal(pool.idleCount, 0);
  }
  const db = await pool.take();
  await db.close();
  t.equal(pool.idleCount, 1, 'one left as it was is kept');
});

t.test('at most `keep` instances are held idle; the rest are closed', async (t) => {
  const pool = new PglitePool(boot, 1);
  const [a, b] = await Promise.all([pool.take(), pool.take()]);
  await a!.close();
  await b!.close();
  t.equal(pool.idleCount, 1);
  t.equal(a!.closed, false);
  t.equal(b!.closed, true);
});

t.test('closes at the same time keep no more than `keep` idle', async (t) => {
  const pool = new PglitePool(boot, 1);
  const taken = await Promise.all([pool.take(), pool.take(), pool.take()]);
  await Promise.all(taken.map((db) => db.close()));
  t.equal(pool.idleCount, 1);
  t.equal(taken.filter((db) => db.closed).length, 2, 'the others closed');
});

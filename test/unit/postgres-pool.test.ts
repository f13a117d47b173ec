import t from 'tap';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { PostgresDatabasePool } from '../helpers/postgres-pool.ts';
import { CHANGES_EMPTYING_KEEPS, SMALL_MIGRATED_SCHEMA } from '../helpers/database-reset-cases.ts';

// The test suite's pool of PostgreSQL databases (test/helpers/postgres-pool.ts): what a test gets back from
// it must be what a fresh copy of the template gives, or a test would see an earlier test's data.
const base = process.env.TEST_DATABASE_URL;
if (!base) t.plan(0, 'TEST_DATABASE_URL is not set: the pool serves PostgreSQL only');
else {
  const urlOf = (name: string) => {
    const url = new URL(base);
    url.pathname = `/${name}`;
    return url.toString();
  };
  const on = async <T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  };
  const admin = <T>(work: (client: pg.Client) => Promise<T>) => on(base, work);
  const created: string[] = [];
  const create = async () => {
    const name = `gs_pool_${process.pid}_${randomBytes(4).toString('hex')}`;
    created.push(name);
    await admin((c) => c.query(`create database ${name}`));
    await on(urlOf(name), (c) => c.query(SMALL_MIGRATED_SCHEMA));
    return name;
  };
  const exists = async (name: string) => (await admin((c) => c.query('select 1 from pg_database where datname = $1', [name]))).rowCount === 1;
  t.teardown(() =>
    admin(async (c) => {
      for (const name of created) await c.query(`drop database if exists ${name} with (force)`);
    }),
  );

  t.test('a database given back comes back emptied, with no session left on it, the migrations kept', async (t) => {
    const pool = new PostgresDatabasePool(create, urlOf, admin);
    const name = await pool.take();
    const left = new pg.Client({ connectionString: urlOf(name) });
    left.on('error', () => {});
    await left.connect();
    await left.query('insert into parents values (1); insert into children values (1, 1)');
    await pool.giveBack(name);
    t.equal(pool.idleCount, 1);
    t.equal(await pool.take(), name, 'the same database is handed out');
    await t.rejects(left.query('select 1'), 'the session the test left was ended');
    t.same(
      await on(
        urlOf(name),
        async (c) =>
          (
            await c.query(
              'select (select count(*)::int from parents) as p, (select count(*)::int from children) as c, (select count(*)::int from mikro_orm_migrations) as m',
            )
          ).rows,
      ),
      [{ p: 0, c: 0, m: 1 }],
    );
  });

  t.test('a database whose schema a test changed is dropped, not handed out again', async (t) => {
    const pool = new PostgresDatabasePool(create, urlOf, admin);
    for (const change of CHANGES_EMPTYING_KEEPS) {
      const name = await pool.take();
      await on(urlOf(name), (c) => c.query(change));
      await pool.giveBack(name);
      t.equal(await exists(name), false, `dropped after: ${change.split('\n')[0]}`);
      t.equal(pool.idleCount, 0);
    }
  });

  t.test('at most `keep` databases are held; the rest are dropped', async (t) => {
    const pool = new PostgresDatabasePool(create, urlOf, admin, 1);
    const [a, b] = await Promise.all([pool.take(), pool.take()]);
    await pool.giveBack(a!);
    await pool.giveBack(b!);
    t.equal(pool.idleCount, 1);
    t.equal(await exists(a!), true);
    t.equal(await exists(b!), false);
  });

  t.test('databases given back at the same time keep no more than `keep`', async (t) => {
    const pool = new PostgresDatabasePool(create, urlOf, admin, 1);
    const taken = await Promise.all([pool.take(), pool.take(), pool.take()]);
    await Promise.all(taken.map((name) => pool.giveBack(name)));
    t.equal(pool.idleCount, 1);
    t.equal((await Promise.all(taken.map(exists))).filter((kept) => kept).length, 1, 'the others dropped');
  });
}

import t from 'tap';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { openDatabase, type Database } from '../../persistence/database.ts';
import { migrations } from '../../persistence/migrations/index.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';

// Nodes of a cluster starting together on a new database migrate it at the same time; an advisory lock
// makes them take turns. PGlite is one process's database, so this runs in the PostgreSQL pass only.
if (!process.env.TEST_DATABASE_URL) {
  t.comment('concurrent migrations are tested in the PostgreSQL pass (TEST_DATABASE_URL)');
} else {
  t.test('three processes opening one new database at once all succeed and apply each migration once', async (t) => {
    const fresh = await freshDatabaseUrl({ empty: true });
    const opened: Database[] = [];
    t.teardown(async () => {
      for (const db of opened) await db.close();
      await fresh.drop();
    });

    const results = await Promise.allSettled([1, 2, 3].map(() => openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' })));
    for (const result of results) if (result.status === 'fulfilled') opened.push(result.value);
    t.same(
      results.map((r) => (r.status === 'rejected' ? String((r.reason as Error)?.message ?? r.reason) : 'ok')),
      ['ok', 'ok', 'ok'],
      'every open succeeded',
    );

    const db = opened[0] ?? (await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' }));
    if (!opened.includes(db)) opened.push(db);
    const rows = await (db.em() as SqlEntityManager).execute<{ name: string; n: string }[]>(
      'select name, count(*)::text as n from mikro_orm_migrations group by name order by name',
    );
    t.equal(rows.length, migrations.length, 'every migration is recorded');
    t.same(
      rows.filter((r) => r.n !== '1'),
      [],
      'no migration recorded twice',
    );

    // The lock is released: a fourth open, later, goes through.
    const later = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' });
    opened.push(later);
    t.pass('a later open is not blocked');
  });
}

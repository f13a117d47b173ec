import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import t from 'tap';
import { openDatabase } from '../../persistence/database.ts';
import { MIGRATION_NAMES } from '../../persistence/migrations/names.ts';
import { migrations } from '../../persistence/migrations/index.ts';
import { ROOT } from '../fixtures/child.ts';

/**
 * Start-up brings the schema up to date: every migration on a new database, the missing ones on an older
 * one, and on a database already up to date nothing, without loading the migrator at all (one read of the
 * migrations table tells). PGlite on disk, so that the same database is opened again.
 */
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-migrations-'));
t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));

const recorded = async (db: Awaited<ReturnType<typeof openDatabase>>) =>
  (await db.em().execute<{ name: string }[]>('select name from mikro_orm_migrations order by id')).map((row) => row.name);
const hasTraceContext = async (db: Awaited<ReturnType<typeof openDatabase>>) =>
  (await db.em().execute<unknown[]>(`select 1 from information_schema.columns where table_name = 'generations' and column_name = 'trace_context'`)).length ===
  1;

t.test('the list of migrations and their names agree', async (t) => {
  t.same(
    migrations.map((m) => m.name),
    [...MIGRATION_NAMES],
  );
  t.ok(
    migrations.every((m) => typeof m.class === 'function'),
    'each name has its class',
  );
});

t.test('a new database gets every migration, recorded in order; one missing is applied at the next start', async (t) => {
  let db = await openDatabase({ databaseUrl: undefined, dataDir });
  t.same(await recorded(db), [...MIGRATION_NAMES], 'all of them, in order');
  t.ok(await hasTraceContext(db));
  // As a database that never got 0017 (whichever migrations follow it): its change and its record gone.
  await db.em().execute('alter table generations drop column trace_context');
  await db.em().execute('delete from mikro_orm_migrations where name = ?', ['0017-trace-context']);
  await db.close();

  db = await openDatabase({ databaseUrl: undefined, dataDir });
  t.teardown(() => db.close());
  t.same([...(await recorded(db))].sort(), [...MIGRATION_NAMES].sort(), 'the missing one recorded again');
  t.ok(await hasTraceContext(db), 'and applied');
});

t.test('a start on a database up to date loads neither the migrator nor the migrations', async (t) => {
  const script = `
    import { createRequire } from 'node:module';
    import { openDatabase } from './persistence/database.ts';
    const db = await openDatabase({ databaseUrl: undefined, dataDir: ${JSON.stringify(dataDir)} });
    // (MikroORM reads the package.json of each of its packages it finds, to check their versions agree.)
    const loaded = Object.keys(createRequire(import.meta.url).cache).filter((f) => /node_modules[\\\\/](@mikro-orm[\\\\/]migrations|umzug)[\\\\/].*\\.js$/.test(f));
    await db.close();
    console.log(JSON.stringify({ loaded }));
  `;
  const run = spawnSync(process.execPath, ['--import', './test/loader/register.mjs', '--input-type=module', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  });
  t.equal(run.status, 0, run.stderr);
  t.same(JSON.parse(run.stdout.trim().split('\n').at(-1)!), { loaded: [] }, 'no module of the migrator was loaded');
});

import fs from 'node:fs/promises';
import path from 'node:path';
import { MikroORM } from '@mikro-orm/core';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { PGlite } from '@electric-sql/pglite';
import { tracePglite } from './traced-pglite.ts';
import pg from 'pg';
import { entities } from './entities/index.ts';
import { MIGRATION_NAMES } from './migrations/names.ts';
import { BoundPostgreSqlDriver } from './bound-connection.ts';

export type DatabaseKind = 'pglite' | 'postgres';

export interface Database {
  kind: DatabaseKind;
  orm: MikroORM;
  /** A fresh entity manager for one unit of work (reads, or a batch of writes). */
  em(): SqlEntityManager;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** `postgres://…`, `memory://`, or undefined for PGlite on disk under dataDir. */
  databaseUrl: string | undefined;
  dataDir: string;
  poolMax?: number;
  /**
   * Bring the schema up to date (true, the default); 'check': refuse a database that lacks a migration (the
   * migrations are another step's, `npm run migrate`); false for a second pool on a database another one migrated.
   */
  migrate?: boolean | 'check';
  /**
   * `memory://` only: the PGlite to use instead of a new empty one (tests pass one loaded from a dump of a
   * database already migrated). It is closed with the database.
   */
  pglite?: PGlite;
}

/** Opens the database chosen by configuration and brings its schema up to date with migrations. */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  const common = {
    entities,
    // The list of migrations is given, with the migrator, only when one is missing (bringUpToDate below).
    migrations: { transactional: true, allOrNothing: true, snapshot: false, silent: true },
    discovery: { warnWhenNoEntities: false },
    allowGlobalContext: false,
    debug: false,
  };

  let orm: MikroORM;
  let kind: DatabaseKind;
  let pglite: PGlite | undefined;
  if (options.databaseUrl?.startsWith('postgres')) {
    kind = 'postgres';
    orm = await MikroORM.init({
      ...common,
      driver: BoundPostgreSqlDriver,
      clientUrl: options.databaseUrl,
      pool: { min: 1, max: options.poolMax ?? 10 },
    });
  } else {
    kind = 'pglite';
    let dir: string | undefined;
    if (options.databaseUrl !== 'memory://') {
      dir = path.join(options.dataDir, 'pglite');
      await fs.mkdir(dir, { recursive: true });
    }
    // PGlite and its driver (about 200 ms of CPU to load) only for the embedded database, not on PostgreSQL.
    const [{ PGlite }, { BoundPGliteDriver }] = await Promise.all([import('@electric-sql/pglite'), import('./bound-pglite.ts')]);
    const instance = dir ? new PGlite(dir) : (options.pglite ?? new PGlite());
    pglite = instance;
    tracePglite(instance, 'postgres');
    orm = await MikroORM.init({
      ...common,
      driver: BoundPGliteDriver,
      dbName: 'postgres',
      driverOptions: { connection: { pglite: () => instance } },
    });
  }

  try {
    if (options.migrate === 'check') {
      const missing = await pendingMigrations(orm);
      if (missing.length > 0) {
        throw new Error(
          `the database lacks ${missing.length} migration(s) (${missing.join(', ')}) and MIGRATE_AT_START is false: run the migrate step (npm run migrate, node dist/app/migrate.js) first`,
        );
      }
    } else if (options.migrate !== false) await bringUpToDate(orm, kind === 'postgres' ? options.databaseUrl! : undefined);
  } catch (error) {
    await orm.close(true);
    await pglite?.close();
    throw error;
  }

  return {
    kind,
    orm,
    em: () => orm.em.fork({ clear: true, useContext: false }) as SqlEntityManager,
    async ping() {
      await (orm.em.fork() as SqlEntityManager).execute('select 1 as ok');
    },
    async close() {
      await orm.close(true);
      await pglite?.close();
    },
  };
}

/**
 * Applies the migrations missing from the database. A database already up to date (every start but the
 * first after an upgrade) is told by one read of the migrations table: the migrator and the migrations'
 * classes (umzug and its dependencies, some 300 modules) are loaded only when there is something to apply.
 * On PostgreSQL, under the migration lock.
 */
async function bringUpToDate(orm: MikroORM, postgresUrl: string | undefined): Promise<void> {
  if (await upToDate(orm)) return;
  const [{ Migrator }, { migrations }] = await Promise.all([import('@mikro-orm/migrations'), import('./migrations/index.ts')]);
  orm.config.set('migrations', { ...orm.config.get('migrations'), migrationsList: migrations });
  const up = () => new Migrator(orm.em as SqlEntityManager).up();
  if (postgresUrl) await underMigrationLock(postgresUrl, up);
  else await up();
}

/** Whether every migration is recorded as applied; false too when the table does not exist yet. */
async function upToDate(orm: MikroORM): Promise<boolean> {
  return (await pendingMigrations(orm)).length === 0;
}

/** The migrations not recorded as applied, in order (all of them when the table does not exist yet). */
export async function pendingMigrations(orm: MikroORM): Promise<string[]> {
  const table = orm.config.get('migrations').tableName ?? 'mikro_orm_migrations';
  const rows = await (orm.em.fork() as SqlEntityManager).execute<{ name: string }[]>(`select name from ${table}`).catch(() => undefined);
  const applied = new Set((rows ?? []).map((row) => row.name));
  return MIGRATION_NAMES.filter((name) => !applied.has(name));
}

/** Key of the advisory lock that serialises migrations between processes sharing one database. */
export const MIGRATION_LOCK_KEY = '7236911355087249713';

/**
 * Runs `work` while holding a session-level advisory lock on a connection of its own, so that several
 * processes starting together on one new database migrate one after the other (the later ones then find
 * nothing left to do). The lock goes with the connection if this process dies.
 */
async function underMigrationLock<T>(databaseUrl: string, work: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => {}); // a lost connection surfaces through the queries below
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    try {
      return await work();
    } finally {
      await client.query('select pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]).catch(() => {});
    }
  } finally {
    await client.end().catch(() => {});
  }
}

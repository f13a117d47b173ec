import fs from 'node:fs/promises';
import path from 'node:path';
import { MikroORM } from '@mikro-orm/core';
import { Migrator } from '@mikro-orm/migrations';
import { PostgreSqlDriver, type SqlEntityManager } from '@mikro-orm/postgresql';
import { PGlite } from '@electric-sql/pglite';
import { PGliteDriver } from 'mikro-orm-pglite';
import { entities } from './entities/index.ts';
import { migrations } from './migrations/index.ts';

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
}

/** Opens the database chosen by configuration and brings its schema up to date with migrations. */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  const common = {
    entities,
    extensions: [Migrator],
    migrations: { migrationsList: migrations, transactional: true, allOrNothing: true, snapshot: false, silent: true },
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
      driver: PostgreSqlDriver,
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
    const instance = dir ? new PGlite(dir) : new PGlite();
    pglite = instance;
    orm = await MikroORM.init({
      ...common,
      driver: PGliteDriver,
      dbName: 'postgres',
      driverOptions: { connection: { pglite: () => instance } },
    });
  }

  try {
    await orm.getMigrator().up();
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

import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { openDatabase } from '../../persistence/database.ts';
import { PglitePool } from './pglite-pool.ts';
import { PostgresDatabasePool } from './postgres-pool.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../persistence/migrations/', import.meta.url));
const PGLITE_MANIFEST = fileURLToPath(new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url));
/** Key of the advisory lock (on the TEST_DATABASE_URL database) under which one process builds a template. */
const TEMPLATE_LOCK_KEY = '7236911355087249714';

/**
 * Where tests keep their data. With TEST_DATABASE_URL set (a Postgres server), a database of its own on it,
 * dropped or emptied for the next test of the process when `drop` is called; otherwise an in-memory PGlite.
 *
 * On PostgreSQL the fresh database is a copy of a template already migrated, or one an earlier test of this
 * process used, emptied and checked against a fresh copy (postgres-pool.ts); `empty: true` for a new one
 * with nothing in it. The service still runs its migrations when it opens it, and finds nothing left to do.
 */
export async function freshDatabaseUrl(options: { empty?: boolean } = {}): Promise<{ url: string; drop(): Promise<void> }> {
  const base = process.env.TEST_DATABASE_URL;
  if (!base) return { url: 'memory://', drop: async () => {} };
  const admin = <T>(work: (client: pg.Client) => Promise<T>) => withClient(base, work);
  if (options.empty) {
    const name = `gs_test_${process.pid}_${randomBytes(4).toString('hex')}`;
    await admin((client) => client.query(`create database ${name}`));
    return {
      url: databaseUrl(base, name),
      drop: () => admin((client) => client.query(`drop database if exists ${name} with (force)`)).then(() => {}),
    };
  }
  databases ??= new PostgresDatabasePool(
    async () => {
      const template = await migratedTemplate(base);
      const name = `gs_test_${process.pid}_${randomBytes(4).toString('hex')}`;
      await admin((client) => client.query(`create database ${name} template ${template}`));
      return name;
    },
    (name) => databaseUrl(base, name),
    admin,
  );
  const pool = databases;
  const name = await pool.take();
  // Handed back once, however often it is dropped (two tests must never be given the same one).
  let givenBack: Promise<void> | undefined;
  return { url: databaseUrl(base, name), drop: () => (givenBack ??= pool.giveBack(name)) };
}

/** The test server's databases of this process, copies of the migrated template (TEST_DATABASE_URL is one server for the whole run). */
let databases: PostgresDatabasePool | undefined;

let template: Promise<string> | undefined;

/**
 * The name of a database migrated to the migrations of this tree, made once on the server and shared by
 * every test process: named by a hash of the migration files (other trees with other migrations have
 * their own), built under a name of its own and renamed when complete, so that its name existing means it
 * is ready. Nothing connects to it (ALLOW_CONNECTIONS false), which CREATE DATABASE … TEMPLATE requires.
 * Templates of earlier migrations stay on the server (a few MB each): ALTER DATABASE … IS_TEMPLATE false, then
 * DROP DATABASE, reclaims one.
 */
function migratedTemplate(base: string): Promise<string> {
  template ??= buildTemplate(base).catch((error: unknown) => {
    template = undefined;
    throw error;
  });
  return template;
}

async function buildTemplate(base: string): Promise<string> {
  const name = `gs_template_${await migrationsHash()}`;
  return withClient(base, async (admin) => {
    const exists = async () => (await admin.query('select 1 from pg_database where datname = $1', [name])).rowCount! > 0;
    if (await exists()) return name;
    await admin.query('select pg_advisory_lock($1::bigint)', [TEMPLATE_LOCK_KEY]);
    try {
      if (await exists()) return name;
      const building = `${name}_build`;
      // Left by a process that died while building it.
      await admin.query(`drop database if exists ${building} with (force)`);
      await admin.query(`create database ${building}`);
      const db = await openDatabase({ databaseUrl: databaseUrl(base, building), dataDir: '.data/test', poolMax: 1 });
      await db.close();
      await admin.query(`alter database ${building} with allow_connections false`);
      await admin.query(`alter database ${building} rename to ${name}`);
      await admin.query(`alter database ${name} with is_template true`);
      return name;
    } finally {
      await admin.query('select pg_advisory_unlock($1::bigint)', [TEMPLATE_LOCK_KEY]).catch(() => {});
    }
  });
}

/** The first 16 hex digits of a SHA-256 over the migration files' names and contents. */
async function migrationsHash(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of (await fs.readdir(MIGRATIONS_DIR)).sort()) {
    hash.update(`${file}\0`);
    hash.update(await fs.readFile(path.join(MIGRATIONS_DIR, file)));
    hash.update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

async function withClient<T>(connectionString: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function databaseUrl(base: string, name: string): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

let pgliteImage: Promise<Blob> | undefined;

/** Loaded from the dump, or one an earlier server of this process closed, emptied (pglite-pool.ts). */
const pglites = new PglitePool(async () => {
  pgliteImage ??= pgliteImageFile().catch((error: unknown) => {
    pgliteImage = undefined;
    throw error;
  });
  const { PGlite } = await import('@electric-sql/pglite');
  return new PGlite({ loadDataDir: await pgliteImage });
});

/**
 * An in-memory PGlite already migrated and empty, for a server on `memory://`: one an earlier server of this
 * process closed, emptied and checked against the dump (pglite-pool.ts), or else one loaded from a dump of a
 * data directory already migrated, which takes about half the time of migrating a new one. The service still
 * runs its migrations when it opens it, and finds nothing left to do.
 */
export function migratedPglite(): Promise<PGlite> {
  return pglites.take();
}

/** Whether what was given `instance` (from migratedPglite) closed it: it is closed, or back in the pool. */
export function pgliteClosed(instance: PGlite): boolean {
  return instance.closed || pglites.closedByBorrower(instance);
}

/**
 * The dump, made once and kept in the temporary folder for every test process after: named by the PGlite
 * version and the migrations' hash, written under a name of its own and renamed when complete (processes
 * making it at once each write a whole file; the last rename wins).
 */
async function pgliteImageFile(): Promise<Blob> {
  const manifest = JSON.parse(await fs.readFile(PGLITE_MANIFEST, 'utf8')) as { version: string };
  const file = path.join(os.tmpdir(), `gs-test-pglite-${manifest.version}-${await migrationsHash()}.tar`);
  const kept = await fs.readFile(file).catch(() => undefined);
  if (kept) return new Blob([kept]);
  const { PGlite } = await import('@electric-sql/pglite');
  const seed = new PGlite();
  const db = await openDatabase({ databaseUrl: 'memory://', dataDir: '.data/test', pglite: seed });
  let image: Blob;
  try {
    image = await seed.dumpDataDir('none');
  } finally {
    await db.close();
  }
  const partial = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await fs.writeFile(partial, Buffer.from(await image.arrayBuffer()));
  await fs.rename(partial, file);
  return image;
}

let pgliteDir: Promise<string> | undefined;

/**
 * A PGlite data directory already migrated, made once from the dump above and kept in the temporary folder
 * for every test process after (named by the PGlite version and the migrations' hash; built under a name
 * of its own and renamed when complete, so that its name existing means it is ready).
 */
function migratedPgliteDir(): Promise<string> {
  pgliteDir ??= buildPgliteDir().catch((error: unknown) => {
    pgliteDir = undefined;
    throw error;
  });
  return pgliteDir;
}

async function buildPgliteDir(): Promise<string> {
  const manifest = JSON.parse(await fs.readFile(PGLITE_MANIFEST, 'utf8')) as { version: string };
  const dir = path.join(os.tmpdir(), `gs-test-pglite-dir-${manifest.version}-${await migrationsHash()}`);
  if (await fs.stat(path.join(dir, 'PG_VERSION')).catch(() => undefined)) return dir;
  pgliteImage ??= pgliteImageFile();
  const building = `${dir}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const { PGlite } = await import('@electric-sql/pglite');
  const db = new PGlite(building, { loadDataDir: await pgliteImage });
  await db.waitReady;
  await db.close();
  // Another process may have finished one first: either copy is the same.
  await fs.rename(building, dir).catch(async () => fs.rm(building, { recursive: true, force: true }));
  return dir;
}

/**
 * Storage that outlives one service process, for tests that stop, kill or restart a server: a temporary
 * DATA_DIR (PGlite keeps its files there) and, with TEST_DATABASE_URL set, a fresh Postgres database.
 * Both are removed when `t` ends.
 */
export async function durableStorage(
  t: Test,
  prefix: string,
  options: { empty?: boolean } = {},
): Promise<{ dataDir: string; postgres: { url: string } | undefined }> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  const postgres = process.env.TEST_DATABASE_URL ? await freshDatabaseUrl(options) : undefined;
  // On PGlite the data directory starts migrated, as a PostgreSQL database starts from a migrated template
  // (`empty: true` for one with nothing in it): a child's first start then skips PGlite's initdb and the
  // migrations, some 7-10 s of a loaded machine's time per process (docs/testing.md).
  if (!postgres && !options.empty) await fs.cp(await migratedPgliteDir(), path.join(dataDir, 'pglite'), { recursive: true });
  t.teardown(async () => {
    await fs.rm(dataDir, { recursive: true, force: true });
    await postgres?.drop();
  });
  return { dataDir, postgres };
}

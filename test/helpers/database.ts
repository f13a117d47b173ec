import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import pg from 'pg';

/**
 * Where tests keep their data. With TEST_DATABASE_URL set (a Postgres server), each call makes a fresh
 * database on it and drops it afterwards; otherwise an in-memory PGlite.
 */
export async function freshDatabaseUrl(): Promise<{ url: string; drop(): Promise<void> }> {
  const base = process.env.TEST_DATABASE_URL;
  if (!base) return { url: 'memory://', drop: async () => {} };
  const name = `gs_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * Storage that outlives one service process, for tests that stop, kill or restart a server: a temporary
 * DATA_DIR (PGlite keeps its files there) and, with TEST_DATABASE_URL set, a fresh Postgres database.
 * Both are removed when `t` ends.
 */
export async function durableStorage(t: Test, prefix: string): Promise<{ dataDir: string; postgres: { url: string } | undefined }> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  const postgres = process.env.TEST_DATABASE_URL ? await freshDatabaseUrl() : undefined;
  t.teardown(async () => {
    await fs.rm(dataDir, { recursive: true, force: true });
    await postgres?.drop();
  });
  return { dataDir, postgres };
}

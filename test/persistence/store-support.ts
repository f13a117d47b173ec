import type { Test } from 'tap';
import { openDatabase, type Database } from '../../persistence/database.ts';
import { freshDatabaseUrl, migratedPglite } from '../helpers/database.ts';

/** Runs a statement on a store test's database and answers its rows (parameters bound by the driver). */
export type Query = <R>(sql: string, params?: unknown[]) => Promise<R[]>;

/**
 * A store test's database (docs/testing.md, Store tests): on PGlite an in-memory copy of the migrated image,
 * with TEST_DATABASE_URL a database of its own from the migrated template; closed and dropped when `t` ends.
 */
export async function storeDatabase(t: Test): Promise<{ db: Database; query: Query }> {
  const fresh = await freshDatabaseUrl();
  const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test', pglite: fresh.url === 'memory://' ? await migratedPglite() : undefined });
  t.teardown(async () => {
    await db.close();
    await fresh.drop();
  });
  return { db, query: <R>(sql: string, params: unknown[] = []) => db.em().execute<R[]>(sql, params) };
}

let made = 0;

/** A workspace row of `plan` (the rows of money, keys, jobs and endpoints refer to one), without an account; answers its id. */
export async function insertWorkspace(query: Query, plan = 'free'): Promise<string> {
  const id = `ws_store_${++made}`;
  await query('insert into workspaces (id, name, plan, personal, created_at, updated_at) values (?, ?, ?, false, now(), now())', [id, id, plan]);
  return id;
}

/** A webhook endpoint of the workspace with its id: active unless `disabled`, subscribed to `types`, deleted at `deletedAt` if given. */
export async function insertEndpoint(
  query: Query,
  workspaceId: string,
  id: string,
  types: string[],
  state: { disabled?: boolean; deletedAt?: Date } = {},
): Promise<string> {
  await query(
    `insert into webhook_endpoints (id, workspace_id, url, event_types, status, secret_sealed, created_at, updated_at, deleted_at)
       values (?, ?, 'https://example.com/hook', ?::jsonb, ?, 'sealed', now(), now(), ?)`,
    [id, workspaceId, JSON.stringify(types), state.disabled ? 'disabled' : 'active', state.deletedAt ?? null],
  );
  return id;
}

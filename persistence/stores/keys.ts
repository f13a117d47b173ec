/**
 * The statements of API keys: the key rows, the record an authenticated request is checked against, and
 * the keys' use (requests per day, last used).
 */
import { ApiKeyEntity, type ApiKey } from '../entities/api-key.ts';
import { emOf } from './orm.ts';
import type { Unit } from './unit.ts';

export type { ApiKey } from '../entities/api-key.ts';

/** Rows written per statement of the key usage. */
const CHUNK = 500;

export function findKey(unit: Unit, id: string): Promise<ApiKey | null> {
  return emOf(unit).findOne(ApiKeyEntity, { id });
}

export async function insertKey(unit: Unit, key: ApiKey): Promise<void> {
  await emOf(unit).insert(ApiKeyEntity, key);
}

/** Revokes a key not yet revoked. */
export async function revokeKey(unit: Unit, id: string, at: Date): Promise<void> {
  await emOf(unit).nativeUpdate(ApiKeyEntity, { id, revokedAt: null }, { revokedAt: at, updatedAt: at });
}

/** Changes a key's row (name, scopes, expiry, limits, revocation). */
export async function updateKeyRow(unit: Unit, id: string, changes: Partial<ApiKey>): Promise<void> {
  await emOf(unit).nativeUpdate(ApiKeyEntity, { id }, changes);
}

/** A page of a workspace's keys, newest first, after the `(createdAt, id)` of the page before. */
export function listKeys(unit: Unit, workspaceId: string, page: { after?: [at: Date, id: string]; limit: number }): Promise<ApiKey[]> {
  const where: Record<string, unknown> = { workspaceId };
  if (page.after) {
    const [at, id] = page.after;
    where.$or = [{ createdAt: { $lt: at } }, { createdAt: at, id: { $lt: id } }];
  }
  return emOf(unit).find(ApiKeyEntity, where, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: page.limit });
}

/** One figure of a key on one day (`YYYY-MM-DD`). */
export interface KeyDayCount {
  day: string;
  n: string | number;
}

/** A key's requests per day between two days, both included (days without one are absent). */
export function keyRequestsByDay(unit: Unit, keyId: string, from: string, to: string): Promise<KeyDayCount[]> {
  return emOf(unit).execute<KeyDayCount[]>(
    `select to_char(day, 'YYYY-MM-DD') as day, requests as n from api_key_usage
        where key_id = ? and day between ?::date and ?::date`,
    [keyId, from, to],
  );
}

/**
 * A key's generations per day between two days, both included, from the usage rollups (kept with the rows
 * in the same transactions, so the figure cannot drift from the generations list).
 */
export function keyGenerationsByDay(unit: Unit, workspaceId: string, keyId: string, from: string, to: string): Promise<KeyDayCount[]> {
  return emOf(unit).execute<KeyDayCount[]>(
    `select to_char(day, 'YYYY-MM-DD') as day, total as n from usage_rollups
        where workspace_id = ? and api_key_id = ? and day between ?::date and ?::date and total <> 0`,
    [workspaceId, keyId, from, to],
  );
}

/** What an authenticated request is checked against: a key with its workspace's plan. */
export interface KeyAuthRow {
  id: string;
  workspace_id: string;
  scopes: unknown;
  expires_at: Date | string | null;
  revoked_at: Date | string | null;
  plan: string;
}

/** The key of a hash with its workspace's plan, if there is one. */
export async function findKeyByHash(unit: Unit, keyHash: string): Promise<KeyAuthRow | undefined> {
  const rows = await emOf(unit).execute<KeyAuthRow[]>(
    `select k.id, k.workspace_id, k.scopes, k.expires_at, k.revoked_at, w.plan
         from api_keys k join workspaces w on w.id = k.workspace_id
        where k.key_hash = ?`,
    [keyHash],
  );
  return rows[0];
}

/** The workspace of the key of a hash, if there is one. */
export async function workspaceOfKeyHash(unit: Unit, keyHash: string): Promise<string | undefined> {
  const rows = await emOf(unit).execute<Array<{ workspace_id: string }>>('select workspace_id from api_keys where key_hash = ?', [keyHash]);
  return rows[0]?.workspace_id;
}

/** The hashes of a workspace's keys. */
export async function keyHashesOf(unit: Unit, workspaceId: string): Promise<string[]> {
  const rows = await emOf(unit).execute<Array<{ key_hash: string }>>('select key_hash from api_keys where workspace_id = ?', [workspaceId]);
  return rows.map((row) => row.key_hash);
}

/**
 * Adds requests to keys' per-day counts and moves their last use forward (by a minute at least), in one
 * transaction. A key deleted with its workspace meanwhile is skipped, not an error.
 */
export async function addKeyUsage(
  unit: Unit,
  counts: ReadonlyArray<readonly [keyId: string, day: string, n: number]>,
  used: ReadonlyArray<readonly [keyId: string, at: number]>,
): Promise<void> {
  await emOf(unit).transactional(async (tx) => {
    for (let i = 0; i < counts.length; i += CHUNK) {
      const chunk = counts.slice(i, i + CHUNK);
      // Joined with api_keys so a key deleted with its workspace meanwhile is skipped, not an error.
      await tx.execute(
        `insert into api_key_usage (key_id, day, requests)
             select v.key_id, v.day::date, v.n::bigint
               from (values ${chunk.map(() => '(?, ?, ?)').join(', ')}) as v(key_id, day, n)
               join api_keys k on k.id = v.key_id
             on conflict (key_id, day) do update set requests = api_key_usage.requests + excluded.requests`,
        chunk.flat(),
      );
    }
    for (let i = 0; i < used.length; i += CHUNK) {
      const chunk = used.slice(i, i + CHUNK);
      await tx.execute(
        `update api_keys k set last_used_at = v.at::timestamptz
               from (values ${chunk.map(() => '(?, ?)').join(', ')}) as v(id, at)
              where k.id = v.id
                and (k.last_used_at is null or k.last_used_at <= v.at::timestamptz - interval '1 minute')`,
        chunk.flatMap(([keyId, at]) => [keyId, new Date(at).toISOString()]),
      );
    }
  });
}

/**
 * The statements of stored Idempotency-Keys (idempotency_keys) beside their writes with the creations
 * (creations.ts): a workspace's unexpired keys read back, and the expired ones purged.
 */
import { ownedShardsSql, type OwnedShards } from '../../cluster/shard-sql.ts';
import type { Database } from '../../database.ts';
import { IdempotencyKeyEntity } from '../../entities/workspace-account.ts';
import { deleteInPages } from '../../paged-delete.ts';
import { emOf } from '../orm.ts';
import type { GenerationRow } from '../generations/rows.ts';
import type { Unit } from '../unit.ts';

/** An Idempotency-Key as stored: its request's hash, its expiry, and the first answer it keeps (the job as created). */
export interface StoredIdempotencyKey {
  key: string;
  requestHash: string;
  /** ms since the epoch. */
  expiresAt: number;
  responseStatus: number;
  generation: GenerationRow;
}

/** The workspace's stored Idempotency-Keys among `keys` that have not expired at `now`, in one query. */
export async function readIdempotencyKeys(unit: Unit, workspaceId: string, keys: string[], now: number): Promise<StoredIdempotencyKey[]> {
  const rows = await emOf(unit).find(IdempotencyKeyEntity, { workspaceId, key: { $in: keys }, expiresAt: { $gt: new Date(now) } });
  return rows.map((row) => {
    // Stored as JSON: its times come back as strings.
    const stored = row.responseBody as Record<string, unknown>;
    const date = (value: unknown) => (value === null || value === undefined ? null : new Date(value as string));
    const generation = {
      ...stored,
      createdAt: date(stored.createdAt),
      updatedAt: date(stored.updatedAt),
      queueDeadline: date(stored.queueDeadline),
      startedAt: date(stored.startedAt),
      completedAt: date(stored.completedAt),
    } as GenerationRow;
    return { key: row.key, requestHash: row.requestHash, expiresAt: new Date(row.expiresAt).getTime(), responseStatus: row.responseStatus, generation };
  });
}

/**
 * Deletes the stored Idempotency-Keys that expired by `before`, `page` at a time until none is left; with
 * `owned` (cluster mode), only those of workspaces in those shards. The expiry is asked again of each row
 * deleted, so a key written afresh meanwhile (a later expiry) no longer matches. Returns how many went.
 */
export function deleteExpiredIdempotencyKeys(db: Database, before: Date, owned: OwnedShards | undefined, page: number): Promise<number> {
  const only = ownedShardsSql('workspace_id', owned);
  return deleteInPages(
    db,
    `delete from idempotency_keys k
      where k.expires_at <= ? and (k.workspace_id, k.key) in (
        select workspace_id, key from idempotency_keys where expires_at <= ?${only.sql} order by expires_at limit ?)
      returning k.key`,
    [before, before, ...only.params],
    page,
  );
}

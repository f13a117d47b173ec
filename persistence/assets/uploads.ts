import { emOf } from '../stores/orm.ts';
import type { Unit } from '../stores/unit.ts';
import type { BlobStore } from '../blob-store/types.ts';

/**
 * Removes up to `limit` of a workspace's upload intents that were never completed and whose completion
 * window closed before `before`, with their objects. Called on the way (each new upload URL sweeps its
 * workspace), so abandoned uploads cannot pile up and no timer is needed.
 */
export async function sweepAbandonedUploads(unit: Unit, blobs: BlobStore, workspaceId: string, before: Date, limit = 10): Promise<number> {
  const em = emOf(unit);
  const stale = await em.execute<Array<{ id: string; storage_key: string }>>(
    'select id, storage_key from uploads where workspace_id = ? and completed_at is null and expires_at < ? order by expires_at limit ?',
    [workspaceId, before, limit],
  );
  for (const upload of stale) {
    await blobs.delete(upload.storage_key);
    await em.execute('delete from uploads where id = ? and completed_at is null', [upload.id]);
  }
  return stale.length;
}

/** Marks a pending upload completed by `assetId`, in `em`'s transaction; false if it was completed already. */
export async function claimUpload(unit: Unit, uploadId: string, assetId: string, at: Date): Promise<boolean> {
  const em = emOf(unit);
  const claimed = await em.execute<Array<{ id: string }>>(
    'update uploads set completed_at = ?, asset_id = ? where id = ? and completed_at is null returning id',
    [at, assetId, uploadId],
  );
  return claimed.length > 0;
}

/** The statements of assets that generations read and make: their inputs, and the room left for their outputs. */
import type { PlanBook } from '../../domain/plans.ts';
import { storageLimitOf, storageUsage } from '../assets/store.ts';
import type { Database } from '../database.ts';

/** An asset as a generation's input needs it: where its bytes are and what it is. */
export interface InputAsset {
  id: string;
  storageKey: string;
  mediaType: string;
}

/** The workspace's assets among `ids` (another workspace's are not found). */
export async function findInputAssets(db: Database, workspaceId: string, ids: string[]): Promise<InputAsset[]> {
  const rows = await db
    .em()
    .execute<Array<{ id: string; storage_key: string; media_type: string }>>(
      'select id, storage_key, media_type from assets where workspace_id = ? and id in (?)',
      [workspaceId, ids],
    );
  return rows.map((r) => ({ id: r.id, storageKey: r.storage_key, mediaType: r.media_type }));
}

/** The workspace's storage used and its plan's limit, read together. */
export async function storageRoomOf(db: Database, workspaceId: string, plans: PlanBook): Promise<{ usedBytes: number; limitBytes: number }> {
  const em = db.em();
  const [usage, limit] = await Promise.all([storageUsage(em, workspaceId), storageLimitOf(em, workspaceId, plans)]);
  return { usedBytes: usage.usedBytes, limitBytes: limit };
}

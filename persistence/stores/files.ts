/**
 * The statements of the files API: asset rows as the caller sees and changes them, and upload intents.
 * Making and removing assets, with the workspace's storage kept exact, is persistence/assets/store.ts.
 */
import { AssetEntity, type Asset } from '../entities/asset.ts';
import { UploadEntity, type Upload } from '../entities/upload.ts';
import { emOf } from './orm.ts';
import type { Unit } from './unit.ts';

export type { Asset, MediaType } from '../entities/asset.ts';
export { MEDIA_TYPES } from '../entities/asset.ts';
export type { Upload } from '../entities/upload.ts';

export function findAsset(unit: Unit, id: string): Promise<Asset | null> {
  return emOf(unit).findOne(AssetEntity, { id });
}

/** An asset's name or favourite mark. */
export async function updateAssetRow(unit: Unit, workspaceId: string, id: string, changes: Partial<Asset>): Promise<void> {
  await emOf(unit).nativeUpdate(AssetEntity, { id, workspaceId }, changes);
}

export interface AssetFilter {
  favorite?: boolean;
  mediaType?: string;
  sourceGenerationId?: string;
}

/**
 * A page of a workspace's assets, newest first, filtered, after the `(createdAt, id)` of the page before.
 * Each filter has an index (workspace_id, filter, created_at desc, id desc): the page is a range scan.
 */
export function listAssets(unit: Unit, workspaceId: string, filter: AssetFilter, page: { after?: [at: Date, id: string]; limit: number }): Promise<Asset[]> {
  const where: Record<string, unknown> = { workspaceId };
  if (filter.favorite !== undefined) where.favorite = filter.favorite;
  if (filter.mediaType !== undefined) where.mediaType = filter.mediaType;
  if (filter.sourceGenerationId !== undefined) where.sourceGenerationId = filter.sourceGenerationId;
  if (page.after) {
    const [at, id] = page.after;
    where.$or = [{ createdAt: { $lt: at } }, { createdAt: at, id: { $lt: id } }];
  }
  return emOf(unit).find(AssetEntity, where, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: page.limit });
}

/** A workspace's upload intent (another workspace's is not found). */
export function findUpload(unit: Unit, workspaceId: string, id: string): Promise<Upload | null> {
  return emOf(unit).findOne(UploadEntity, { id, workspaceId });
}

/** An upload intent as it is first written: not completed, no asset yet (its media type as the route checked it). */
export type NewUpload = Omit<Upload, 'mediaType' | 'completedAt' | 'assetId'> & { mediaType: string };

export async function insertUpload(unit: Unit, upload: NewUpload): Promise<void> {
  await emOf(unit).execute(
    `insert into uploads (id, workspace_id, storage_key, media_type, content_type, bytes, filename, created_by, created_at, expires_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      upload.id,
      upload.workspaceId,
      upload.storageKey,
      upload.mediaType,
      upload.contentType,
      upload.bytes,
      upload.filename,
      upload.createdBy,
      upload.createdAt,
      upload.expiresAt,
    ],
  );
}

/** Whether an upload of this blob key exists, and when it was completed (null: not yet). */
export async function uploadOfKey(unit: Unit, storageKey: string): Promise<{ completed_at: Date | null } | undefined> {
  const [upload] = await emOf(unit).execute<Array<{ completed_at: Date | null }>>('select completed_at from uploads where storage_key = ?', [storageKey]);
  return upload;
}

/** The media type of each of the workspace's assets among `ids` (another workspace's are not found). */
export function assetMediaTypes(unit: Unit, workspaceId: string, ids: string[]): Promise<Array<{ id: string; media_type: string }>> {
  return emOf(unit).execute<Array<{ id: string; media_type: string }>>('select id, media_type from assets where workspace_id = ? and id in (?)', [
    workspaceId,
    ids,
  ]);
}

/** What a door answer needs of an output asset: where its bytes are, their type, size and name. */
export interface OutputAssetRow {
  id: string;
  storage_key: string;
  content_type: string;
  bytes: string | number;
  name: string | null;
}

/** The workspace's assets among `ids` as outputs (another workspace's are not found). */
export function outputAssetRows(unit: Unit, workspaceId: string, ids: string[]): Promise<OutputAssetRow[]> {
  return emOf(unit).execute<OutputAssetRow[]>('select id, storage_key, content_type, bytes, name from assets where workspace_id = ? and id in (?)', [
    workspaceId,
    ids,
  ]);
}

/**
 * Making and removing assets, with the workspace's storage account kept exact.
 *
 * For other modules (the generation actor stores its outputs with these, inside its own transaction):
 * - `tryCreateAsset(em, input)`: adds the asset and its bytes to the workspace's storage in `em`'s
 *   transaction; returns `{ ok: false, ... }` when the plan's storage limit would be passed, having changed
 *   nothing and run no failing statement (so a shared group-commit transaction stays usable).
 * - `createAsset(em, input)`: the same, throwing StorageLimitError instead.
 * - `deleteAsset(em, workspaceId, assetId)`: removes the row and frees its bytes; the caller deletes the
 *   blob after the commit.
 *
 * Accounting: one `workspace_storage` row per workspace, changed by a single conditional UPDATE
 * (`used_bytes + n <= limit`). Its row lock serialises concurrent changes of one workspace until commit,
 * so used bytes always equal the sum over the workspace's assets and never pass the limit.
 */
import { emOf } from '../stores/orm.ts';
import type { Unit } from '../stores/unit.ts';
import type { PlanBook } from '../../domain/plans.ts';
import { newId } from '../ids.ts';
import type { Asset, MediaType } from '../entities/asset.ts';
import { ADD_ASSET_USAGE } from '../usage-series.ts';

export interface NewAsset {
  /** Defaults to a new `ast_` id; pass one when the storage key was made from it. */
  id?: string;
  workspaceId: string;
  mediaType: MediaType;
  contentType: string;
  bytes: number;
  width?: number | null;
  height?: number | null;
  durationSeconds?: number | null;
  sourceGenerationId?: string | null;
  name?: string | null;
  storageKey: string;
  /** Defaults to now. */
  createdAt?: Date;
  /** The workspace's storage limit, from its plan (storageLimitOf). */
  limitBytes: number;
}

export interface StorageRefusal {
  ok: false;
  reason: 'storage_limit';
  usedBytes: number;
  limitBytes: number;
  requestedBytes: number;
}

export class StorageLimitError extends Error {
  constructor(readonly refusal: StorageRefusal) {
    super(`storage limit reached: ${refusal.usedBytes} of ${refusal.limitBytes} bytes used, ${refusal.requestedBytes} more asked for`);
    this.name = 'StorageLimitError';
  }
}

const COUNT_COLUMN: Record<MediaType, string> = { image: 'image_count', video: 'video_count', audio: 'audio_count' };

/** The workspace's storage limit, from its plan in the catalog served. */
export async function storageLimitOf(unit: Unit, workspaceId: string, plans: PlanBook): Promise<number> {
  const em = emOf(unit);
  const [row] = await em.execute<Array<{ plan: string }>>('select plan from workspaces where id = ?', [workspaceId]);
  return plans.plan(row?.plan ?? plans.defaultPlan().id).storageBytes;
}

/** Adds the asset in `em`'s transaction, or returns why not (plan storage limit) having changed nothing. */
export async function tryCreateAsset(unit: Unit, input: NewAsset): Promise<{ ok: true; asset: Asset } | StorageRefusal> {
  const em = emOf(unit);
  if (!Number.isSafeInteger(input.bytes) || input.bytes < 0) throw new RangeError(`asset bytes must be a whole number >= 0, got ${input.bytes}`);
  const limit = input.limitBytes;
  const reserved = await addStorage(em, input.workspaceId, input.mediaType, input.bytes, limit);
  if (!reserved.ok) return { ok: false, reason: 'storage_limit', usedBytes: reserved.usedBytes, limitBytes: limit, requestedBytes: input.bytes };
  const now = input.createdAt ?? new Date();
  const asset: Asset = {
    id: input.id ?? newId('ast', now.getTime()),
    workspaceId: input.workspaceId,
    mediaType: input.mediaType,
    contentType: input.contentType,
    bytes: input.bytes,
    width: input.width ?? null,
    height: input.height ?? null,
    durationSeconds: input.durationSeconds ?? null,
    favorite: false,
    name: input.name ?? null,
    sourceGenerationId: input.sourceGenerationId ?? null,
    storageKey: input.storageKey,
    createdAt: now,
    updatedAt: now,
  };
  // A generation's output counts in its usage rollup and series (persistence/usage-series.ts) from the same statement.
  await em.execute(
    `with changed as (
       insert into assets (id, workspace_id, media_type, content_type, bytes, width, height, duration_seconds, favorite, name,
         source_generation_id, storage_key, created_at, updated_at) values (?, ?, ?, ?, ?, ?, ?, ?, false, ?, ?, ?, ?, ?)
       returning workspace_id, source_generation_id, bytes)
     ${ADD_ASSET_USAGE}`,
    [
      asset.id,
      asset.workspaceId,
      asset.mediaType,
      asset.contentType,
      asset.bytes,
      asset.width,
      asset.height,
      asset.durationSeconds,
      asset.name,
      asset.sourceGenerationId,
      asset.storageKey,
      asset.createdAt,
      asset.updatedAt,
    ],
  );
  return { ok: true, asset };
}

/** Adds the asset in `em`'s transaction; throws StorageLimitError past the plan's storage limit. */
export async function createAsset(unit: Unit, input: NewAsset): Promise<Asset> {
  const em = emOf(unit);
  const result = await tryCreateAsset(em, input);
  if (!result.ok) throw new StorageLimitError(result);
  return result.asset;
}

/**
 * Removes an asset of the workspace and frees its bytes, in `em`'s transaction. Returns the removed row
 * (so the caller can delete its blob after the commit), or undefined when there was none: of two
 * concurrent deletes only one frees the bytes.
 */
export async function deleteAsset(
  unit: Unit,
  workspaceId: string,
  assetId: string,
): Promise<{ storageKey: string; bytes: number; mediaType: MediaType } | undefined> {
  const em = emOf(unit);
  const [row] = await em.execute<Array<{ storage_key: string; bytes: string | number; media_type: MediaType; source_generation_id: string | null }>>(
    'delete from assets where id = ? and workspace_id = ? returning storage_key, bytes, media_type, source_generation_id',
    [assetId, workspaceId],
  );
  if (!row) return undefined;
  const bytes = Number(row.bytes);
  // A generation's output leaves its usage rollup; before the storage row, in the order a settlement locks them.
  if (row.source_generation_id !== null) {
    await em.execute(`with changed as (select ?::text as workspace_id, ?::text as source_generation_id, ?::bigint as bytes) ${ADD_ASSET_USAGE}`, [
      workspaceId,
      row.source_generation_id,
      -bytes,
    ]);
  }
  await em.execute(
    `update workspace_storage set used_bytes = used_bytes - ?, ${COUNT_COLUMN[row.media_type]} = ${COUNT_COLUMN[row.media_type]} - 1, updated_at = now()
     where workspace_id = ?`,
    [bytes, workspaceId],
  );
  return { storageKey: row.storage_key, bytes, mediaType: row.media_type };
}

export interface StorageUsage {
  usedBytes: number;
  counts: Record<MediaType, number>;
}

export async function storageUsage(unit: Unit, workspaceId: string): Promise<StorageUsage> {
  const em = emOf(unit);
  const [row] = await em.execute<Array<{ used_bytes: string | number; image_count: number; video_count: number; audio_count: number }>>(
    'select used_bytes, image_count, video_count, audio_count from workspace_storage where workspace_id = ?',
    [workspaceId],
  );
  return {
    usedBytes: Number(row?.used_bytes ?? 0),
    counts: { image: Number(row?.image_count ?? 0), video: Number(row?.video_count ?? 0), audio: Number(row?.audio_count ?? 0) },
  };
}

async function addStorage(
  unit: Unit,
  workspaceId: string,
  mediaType: MediaType,
  bytes: number,
  limit: number,
): Promise<{ ok: true } | { ok: false; usedBytes: number }> {
  const em = emOf(unit);
  const column = COUNT_COLUMN[mediaType];
  // One statement: the first asset makes the row, later ones add to it; either only within the limit.
  const updated = await em.execute<Array<{ used_bytes: string | number }>>(
    `insert into workspace_storage as s (workspace_id, used_bytes, ${column}, updated_at)
       select ?, ?, 1, now() where ? <= ?
     on conflict (workspace_id) do update set used_bytes = s.used_bytes + excluded.used_bytes, ${column} = s.${column} + 1, updated_at = now()
       where s.used_bytes + excluded.used_bytes <= ?
     returning used_bytes`,
    [workspaceId, bytes, bytes, limit, limit],
  );
  if (updated.length > 0) return { ok: true };
  const usage = await storageUsage(em, workspaceId);
  return { ok: false, usedBytes: usage.usedBytes };
}

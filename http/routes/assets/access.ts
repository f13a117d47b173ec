import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../errors.ts';
import type { Principal } from '../../route.ts';
import { AssetEntity, type Asset } from '../../../persistence/entities/asset.ts';
import { openWorkspace, type WorkspaceAccess } from '../workspaces/access.ts';

/** The workspace whose files the caller may use: any member, or a key of that workspace. */
export function openFilesWorkspace(em: SqlEntityManager, auth: Principal | undefined, workspaceId: string): Promise<WorkspaceAccess> {
  return openWorkspace(em, auth, workspaceId);
}

/**
 * An asset the caller may see. An asset of another workspace answers exactly as a missing one (404), as does
 * one whose workspace is not the `workspaceId` the request named, so ids cannot be probed.
 */
export async function openAsset(em: SqlEntityManager, auth: Principal | undefined, id: string, workspaceId: string | undefined): Promise<Asset> {
  const asset = await em.findOne(AssetEntity, { id });
  if (!asset || (workspaceId !== undefined && asset.workspaceId !== workspaceId)) throw new ApiError('not_found', `No asset ${id}.`);
  try {
    await openWorkspace(em, auth, asset.workspaceId);
  } catch (error) {
    if (error instanceof ApiError && (error.code === 'not_found' || error.code === 'forbidden')) throw new ApiError('not_found', `No asset ${id}.`);
    throw error;
  }
  return asset;
}

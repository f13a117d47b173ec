import { ApiError } from '../../errors.ts';
import type { Principal } from '../../route.ts';
import { findAsset, type Asset } from '../../../persistence/stores/files.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';
import { openWorkspace, type WorkspaceAccess } from '../workspaces/access.ts';

/** The workspace whose files the caller may use: any member, or a key of that workspace. */
export function openFilesWorkspace(unit: Unit, auth: Principal | undefined, workspaceId: string): Promise<WorkspaceAccess> {
  return openWorkspace(unit, auth, workspaceId);
}

/**
 * An asset the caller may see. An asset of another workspace answers exactly as a missing one (404), as does
 * one whose workspace is not the `workspaceId` the request named, so ids cannot be probed.
 */
export async function openAsset(unit: Unit, auth: Principal | undefined, id: string, workspaceId: string | undefined): Promise<Asset> {
  const asset = await findAsset(unit, id);
  if (!asset || (workspaceId !== undefined && asset.workspaceId !== workspaceId)) throw new ApiError('not_found', `No asset ${id}.`);
  try {
    await openWorkspace(unit, auth, asset.workspaceId);
  } catch (error) {
    if (error instanceof ApiError && (error.code === 'not_found' || error.code === 'forbidden')) throw new ApiError('not_found', `No asset ${id}.`);
    throw error;
  }
  return asset;
}

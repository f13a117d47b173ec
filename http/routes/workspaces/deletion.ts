import { ApiError } from '../../errors.ts';
import { countUnfinishedGenerations, deleteWorkspaceRow, findWorkspace, leftoversOf } from '../../../persistence/stores/workspaces.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';
import type { Services } from '../../services.ts';

/**
 * A reason the workspace cannot be deleted right now, or undefined. Guards run inside the deleting
 * transaction after the workspace row is locked FOR UPDATE. A row that references the workspace (a
 * generation) takes a KEY SHARE lock on it when inserted, which FOR UPDATE excludes: an insert still in
 * flight is waited for and then counted, and one that comes later waits and then fails its foreign key.
 * So a guard that counts such rows cannot miss one.
 */
export type WorkspaceDeletionGuard = (tx: Unit, workspaceId: string) => Promise<string | undefined>;

/**
 * No running generations (docs/auth-and-keys.md, Workspaces). Any non-terminal generation (queued, reserved, submitted,
 * running) holds credits and a provider job; deleting under it would strand both.
 */
export const noRunningGenerations: WorkspaceDeletionGuard = async (tx, workspaceId) => {
  const active = await countUnfinishedGenerations(tx, workspaceId);
  if (active === 0) return undefined;
  return `${active} generation${active === 1 ? ' is' : 's are'} still queued or running; cancel ${active === 1 ? 'it' : 'them'} or wait for ${active === 1 ? 'it' : 'them'} to finish.`;
};

/** Every guard consulted before a workspace is deleted (by its owner, or with its owner's account); later work appends its own. */
export const workspaceDeletionGuards: WorkspaceDeletionGuard[] = [noRunningGenerations];

/** What a deleted workspace leaves outside the database, to clean up once the deletion has committed. */
export interface RemovedWorkspace {
  /** Hashes of its API keys, to drop from every node's key cache. */
  keyHashes: string[];
  /** Blob store keys of its assets and uploads. */
  storageKeys: string[];
}

/**
 * Deletes the workspace and, through the schema's ON DELETE CASCADE, its members, invitations, API keys,
 * generations, assets and the rest of its rows. Call inside a transaction; throws 409 conflict when a guard
 * objects, leaving everything as it was. Pass what it returns to cleanUpRemovedWorkspaces after the commit.
 */
export async function deleteWorkspaceIn(tx: Unit, workspaceId: string): Promise<RemovedWorkspace> {
  const workspace = await findWorkspace(tx, workspaceId, { lock: true });
  if (!workspace) throw new ApiError('not_found', `No workspace ${workspaceId}.`);
  for (const guard of workspaceDeletionGuards) {
    const reason = await guard(tx, workspaceId);
    if (reason) throw new ApiError('conflict', `Workspace ${workspaceId} cannot be deleted now: ${reason}`);
  }
  const leftovers = await leftoversOf(tx, workspaceId);
  await deleteWorkspaceRow(tx, workspaceId);
  return leftovers;
}

/**
 * After the commit: deleted keys stop working at once on every node (not within the cache's TTL), and the
 * workspaces' files leave the blob store. A file that cannot be removed is logged, not fatal: the rows are
 * already gone, and the answer must say so.
 */
export async function cleanUpRemovedWorkspaces(services: Services, removed: RemovedWorkspace[]): Promise<void> {
  await Promise.all(removed.flatMap((r) => r.keyHashes).map((hash) => services.keyCache.invalidate(hash)));
  await Promise.all(
    removed
      .flatMap((r) => r.storageKeys)
      .map(async (key) => {
        try {
          await services.blobs.delete(key);
        } catch (error) {
          services.logger.warn({ err: error, storageKey: key }, 'could not delete the file of a deleted workspace; it is orphaned');
        }
      }),
  );
}

import { LockMode } from '@mikro-orm/core';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../errors.ts';
import { WorkspaceEntity } from '../../../persistence/entities/workspace.ts';
import { ApiKeyEntity } from '../../../persistence/entities/api-key.ts';
import { GenerationEntity } from '../../../persistence/entities/generation.ts';
import { TERMINAL_STATUSES } from '../../../actors/generation/state.ts';
import type { Services } from '../../../runtime/services.ts';

/**
 * A reason the workspace cannot be deleted right now, or undefined. Guards run inside the deleting
 * transaction after the workspace row is locked FOR UPDATE. A row that references the workspace (a
 * generation) takes a KEY SHARE lock on it when inserted, which FOR UPDATE excludes: an insert still in
 * flight is waited for and then counted, and one that comes later waits and then fails its foreign key.
 * So a guard that counts such rows cannot miss one.
 */
export type WorkspaceDeletionGuard = (tx: SqlEntityManager, workspaceId: string) => Promise<string | undefined>;

/**
 * DECISIONS.md: no running generations. Any non-terminal generation (queued, reserved, submitted,
 * running) holds credits and a provider job; deleting under it would strand both.
 */
export const noRunningGenerations: WorkspaceDeletionGuard = async (tx, workspaceId) => {
  const active = await tx.count(GenerationEntity, { workspaceId, status: { $nin: [...TERMINAL_STATUSES] } });
  if (active === 0) return undefined;
  return `${active} generation${active === 1 ? ' is' : 's are'} still queued or running; cancel ${active === 1 ? 'it' : 'them'} or wait for ${active === 1 ? 'it' : 'them'} to finish.`;
};

/** Every guard consulted before a workspace is deleted (by its owner, or with its owner's account); later work appends its own. */
export const workspaceDeletionGuards: WorkspaceDeletionGuard[] = [noRunningGenerations];

/**
 * Deletes the workspace and, through the schema's ON DELETE CASCADE, its members, invitations and API keys.
 * Call inside a transaction; throws 409 conflict when a guard objects, leaving everything as it was.
 * Returns the hashes of the keys that went with it: pass them to forgetKeys once the transaction commits.
 */
export async function deleteWorkspaceIn(tx: SqlEntityManager, workspaceId: string): Promise<string[]> {
  const workspace = await tx.findOne(WorkspaceEntity, { id: workspaceId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (!workspace) throw new ApiError('not_found', `No workspace ${workspaceId}.`);
  for (const guard of workspaceDeletionGuards) {
    const reason = await guard(tx, workspaceId);
    if (reason) throw new ApiError('conflict', `Workspace ${workspaceId} cannot be deleted now: ${reason}`);
  }
  const keys = await tx.find(ApiKeyEntity, { workspaceId }, { fields: ['keyHash'] });
  await tx.nativeDelete(WorkspaceEntity, { id: workspaceId });
  return keys.map((key) => key.keyHash);
}

/** Drops deleted keys from every node's key cache, so they stop working at once rather than within the cache's TTL. */
export async function forgetKeys(services: Services, keyHashes: string[]): Promise<void> {
  await Promise.all(keyHashes.map((hash) => services.keyCache.invalidate(hash)));
}

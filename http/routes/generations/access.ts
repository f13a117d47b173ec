import { ApiError } from '../../errors.ts';
import type { Principal } from '../../route.ts';
import { isMember, type Workspace } from '../../../persistence/stores/workspaces.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';
import { openWorkspace } from '../workspaces/access.ts';

/**
 * The workspace a generations or models read is about. An API key reads its own workspace (naming another
 * is 403, docs/api.md; naming none is fine: a key has exactly one); a session must name a
 * workspace it is a member of (404 otherwise, as for one that does not exist).
 */
export async function readWorkspace(unit: Unit, auth: Principal | undefined, workspaceId: string | undefined): Promise<Workspace> {
  if (!auth) throw new ApiError('unauthenticated');
  if (auth.kind === 'key') {
    if (workspaceId !== undefined && workspaceId !== auth.workspaceId) throw new ApiError('forbidden', 'This API key belongs to another workspace.');
    return (await openWorkspace(unit, auth, auth.workspaceId)).workspace;
  }
  if (workspaceId === undefined) throw new ApiError('validation_error', 'query.workspaceId: is required when signed in (an API key implies its workspace)');
  return (await openWorkspace(unit, auth, workspaceId)).workspace;
}

/** Whether the caller may see a resource of `workspaceId`: the key's own workspace, or one the user is a member of. */
export async function canRead(unit: Unit, auth: Principal | undefined, workspaceId: string): Promise<boolean> {
  if (!auth) return false;
  if (auth.kind === 'key') return auth.workspaceId === workspaceId;
  return isMember(unit, workspaceId, auth.userId);
}

import { ApiError } from '../../errors.ts';
import type { Principal, Scope } from '../../route.ts';
import type { Workspace } from '../../../persistence/stores/workspaces.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';
import { MANAGERS, openWorkspace, requireRole } from '../workspaces/access.ts';

/**
 * The workspace a money request is about. Reads: any member, or a key of the workspace (its scope was
 * checked by the route). Writes that spend money (`manage`): an owner or admin when signed in; with a
 * key, the route's scope, and for billing routes (access `auth`) a key holding wallet.write or all.
 */
export async function moneyWorkspace(
  unit: Unit,
  auth: Principal | undefined,
  workspaceId: string,
  manage?: { action: string; keyScopes?: Scope[] },
): Promise<Workspace> {
  const access = await openWorkspace(unit, auth, workspaceId);
  if (!manage) return access.workspace;
  if (auth?.kind === 'key') {
    const needed = manage.keyScopes;
    if (needed && !auth.scopes.some((scope) => scope === 'all' || needed.includes(scope))) {
      throw new ApiError('forbidden', `This API key needs one of the scopes ${needed.join(', ')} to ${manage.action}.`);
    }
    return access.workspace;
  }
  requireRole(access, MANAGERS, manage.action);
  return access.workspace;
}

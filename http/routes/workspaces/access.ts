import { ApiError } from '../../errors.ts';
import type { Principal } from '../../route.ts';
import { findMember, findWorkspace, type Role, type Workspace } from '../../../persistence/stores/workspaces.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';

/** The caller as a signed-in user. People (members, invitations, the account) are managed from the dashboard only. */
export function requireSession(auth: Principal | undefined, action: string): { userId: string; sessionId: string } {
  if (!auth) throw new ApiError('unauthenticated');
  if (auth.kind !== 'session') throw new ApiError('forbidden', `API keys cannot ${action}; sign in to the dashboard.`);
  return auth;
}

export interface WorkspaceAccess {
  workspace: Workspace;
  /** The caller's role; null for an API key of the workspace. */
  role: Role | null;
}

/**
 * The workspace as the caller may see it. A key of another workspace is 403 (docs/api.md, Authentication);
 * a user who is not a member gets 404, exactly as for a workspace that does not exist, so ids cannot be probed.
 * With `lock` (inside a transaction) the workspace row is taken FOR UPDATE first: changes to one workspace's
 * people are serialised, so what is checked next (who is owner, who is a member) still holds at commit.
 */
export async function openWorkspace(unit: Unit, auth: Principal | undefined, workspaceId: string, options: { lock?: boolean } = {}): Promise<WorkspaceAccess> {
  if (!auth) throw new ApiError('unauthenticated');
  if (auth.kind === 'key') {
    if (auth.workspaceId !== workspaceId) throw new ApiError('forbidden', 'This API key belongs to another workspace.');
    const workspace = await findWorkspace(unit, workspaceId, options);
    if (!workspace) throw notFound(workspaceId);
    return { workspace, role: null };
  }
  // Membership first, so a stranger never takes a lock on someone else's workspace.
  let member = await findMember(unit, workspaceId, auth.userId);
  if (!member) throw notFound(workspaceId);
  const workspace = await findWorkspace(unit, workspaceId, options);
  if (!workspace) throw notFound(workspaceId);
  if (options.lock) {
    // Read again under the lock: a concurrent change may have removed the caller or changed their role.
    member = await findMember(unit, workspaceId, auth.userId, { refresh: true });
    if (!member) throw notFound(workspaceId);
  }
  return { workspace, role: member.role };
}

/**
 * Checks that the caller may act in the workspace, without reading the workspace row for an API key: a key
 * is checked against the database when it is authenticated, and deleting a workspace drops its keys from
 * every node's cache at once, so a key's own workspace exists. Callers that need the row use openWorkspace.
 */
export async function enterWorkspace(unit: () => Unit, auth: Principal | undefined, workspaceId: string): Promise<void> {
  if (auth?.kind === 'key') {
    if (auth.workspaceId !== workspaceId) throw new ApiError('forbidden', 'This API key belongs to another workspace.');
    return;
  }
  await openWorkspace(unit(), auth, workspaceId);
}

/** Refuses (403) a caller whose role is not one of `allowed`. */
export function requireRole(access: WorkspaceAccess, allowed: readonly Role[], action: string): Role {
  const role = access.role;
  if (role === null || !allowed.includes(role)) {
    const who = allowed.length === 1 ? `the ${allowed[0]}` : `${allowed.slice(0, -1).join(', ')} or ${allowed[allowed.length - 1]}`;
    throw new ApiError('forbidden', `Only ${who} of the workspace can ${action}.`);
  }
  return role;
}

export const MANAGERS: readonly Role[] = ['owner', 'admin'];

function notFound(workspaceId: string): ApiError {
  return new ApiError('not_found', `No workspace ${workspaceId}.`);
}

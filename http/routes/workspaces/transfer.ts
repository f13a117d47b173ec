import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { findMember, setMemberRole, touchWorkspace } from '../../../persistence/stores/workspaces.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { openWorkspace, requireRole, requireSession } from './access.ts';
import { toWorkspaceOut, TransferIn, WorkspaceOut, WorkspaceParams } from './shapes.ts';

export const transferOwnership = defineRoute({
  method: 'POST',
  path: '/v1/workspaces/:workspaceId/transfer',
  operationId: 'transferWorkspaceOwnership',
  summary: 'Make another member the owner; the caller (the owner) becomes admin. 409 when the user is not a member',
  description: 'Makes another member the owner of the workspace; the caller, who must be the owner, becomes an admin. A user who is not a member is 409.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  params: WorkspaceParams,
  body: TransferIn,
  responses: { 200: WorkspaceOut },
  handler: async ({ auth, params, body, services }) => {
    const { userId: ownerId } = requireSession(auth, 'transfer ownership');
    const now = new Date(services.clock.now());
    const workspace = await inTransaction(openUnit(services.db), async (tx) => {
      const access = await openWorkspace(tx, auth, params.workspaceId, { lock: true });
      requireRole(access, ['owner'], 'transfer ownership');
      if (body.userId === ownerId) throw new ApiError('conflict', 'You already own this workspace.');
      const target = await findMember(tx, params.workspaceId, body.userId);
      if (!target) throw new ApiError('conflict', `User ${body.userId} is not a member of workspace ${params.workspaceId}; invite them first.`);
      // Demote first: the schema allows one owner per workspace at any moment.
      await setMemberRole(tx, params.workspaceId, ownerId, 'admin');
      await setMemberRole(tx, params.workspaceId, body.userId, 'owner');
      await touchWorkspace(tx, params.workspaceId, now);
      return { ...access.workspace, updatedAt: now };
    });
    return { body: toWorkspaceOut(workspace, 'admin') };
  },
});

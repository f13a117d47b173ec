import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { deleteMember } from '../../../persistence/stores/workspaces.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { openWorkspace, requireSession } from './access.ts';
import { WorkspaceParams } from './shapes.ts';

export const leaveWorkspace = defineRoute({
  method: 'POST',
  path: '/v1/workspaces/:workspaceId/leave',
  operationId: 'leaveWorkspace',
  summary: 'Leave a workspace (409 for the owner, who must transfer ownership first)',
  description: 'Removes the signed-in user from a workspace. The owner cannot leave (409) and must transfer ownership or delete the workspace first.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  params: WorkspaceParams,
  responses: { 204: null },
  handler: async ({ auth, params, services }) => {
    const { userId } = requireSession(auth, 'leave workspaces');
    await inTransaction(openUnit(services.db), async (tx) => {
      const access = await openWorkspace(tx, auth, params.workspaceId, { lock: true });
      if (access.role === 'owner')
        throw new ApiError('conflict', 'The owner cannot leave; transfer ownership to another member first, or delete the workspace.');
      await deleteMember(tx, params.workspaceId, userId);
    });
    return { status: 204 };
  },
});

import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { deleteMember, findMember } from '../../../persistence/stores/workspaces.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { MANAGERS, openWorkspace, requireRole, requireSession } from './access.ts';
import { MemberParams } from './shapes.ts';

export const removeMember = defineRoute({
  method: 'DELETE',
  path: '/v1/workspaces/:workspaceId/members/:userId',
  operationId: 'removeWorkspaceMember',
  summary: 'Remove a member (owner or admin; anyone may remove themselves; the owner cannot be removed: 409 for the owner, 403 for an admin)',
  description:
    'Removes a member from a workspace; owners and admins may remove others, and anyone may remove themselves. The owner cannot be removed: 409 for the owner, 403 for an admin.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  params: MemberParams,
  responses: { 204: null },
  handler: async ({ auth, params, services }) => {
    const { userId: callerId } = requireSession(auth, 'manage members');
    await inTransaction(openUnit(services.db), async (tx) => {
      const access = await openWorkspace(tx, auth, params.workspaceId, { lock: true });
      const self = params.userId === callerId;
      if (!self) requireRole(access, MANAGERS, 'remove members');
      const member = self ? { role: access.role } : await findMember(tx, params.workspaceId, params.userId);
      if (!member) throw new ApiError('not_found', `No member ${params.userId} in workspace ${params.workspaceId}.`);
      if (member.role === 'owner') {
        if (access.role !== 'owner') throw new ApiError('forbidden', 'An admin cannot remove the owner.');
        throw new ApiError('conflict', 'The owner cannot be removed; transfer ownership to another member first.');
      }
      await deleteMember(tx, params.workspaceId, params.userId);
    });
    return { status: 204 };
  },
});

import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { cancelPendingInvitation, findInvitation } from '../../../persistence/stores/workspaces.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { MANAGERS, openWorkspace, requireRole, requireSession } from './access.ts';
import { InvitationParams } from './shapes.ts';

export const cancelInvitation = defineRoute({
  method: 'DELETE',
  path: '/v1/workspaces/:workspaceId/invitations/:invitationId',
  operationId: 'cancelInvitation',
  summary: 'Cancel an invitation so its token no longer works (owner or admin); 409 once accepted or cancelled',
  description: 'Cancels a pending invitation, so its token no longer works; owners and admins only. An invitation already accepted or cancelled is 409.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  params: InvitationParams,
  responses: { 204: null },
  handler: async ({ auth, params, services }) => {
    requireSession(auth, 'manage invitations');
    await inTransaction(openUnit(services.db), async (tx) => {
      const access = await openWorkspace(tx, auth, params.workspaceId, { lock: true });
      requireRole(access, MANAGERS, 'cancel invitations');
      const invitation = await findInvitation(tx, params.workspaceId, params.invitationId);
      if (!invitation) throw new ApiError('not_found', `No invitation ${params.invitationId} in workspace ${params.workspaceId}.`);
      if (invitation.status !== 'pending') throw new ApiError('conflict', `The invitation was already ${invitation.status}.`);
      await cancelPendingInvitation(tx, invitation.id);
    });
    return { status: 204 };
  },
});

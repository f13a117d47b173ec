import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { findUserByEmail } from '../../../persistence/stores/identity.ts';
import {
  findMember,
  findPendingInvitation,
  insertInvitation,
  isUniqueViolation,
  retireInvitation,
  type Invitation,
} from '../../../persistence/stores/workspaces.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { MANAGERS, openWorkspace, requireRole, requireSession } from './access.ts';
import { INVITATION_TTL_MS, invitationTokenHash, newInvitationToken } from './invitation-tokens.ts';
import { CreatedInvitationOut, InvitationIn, toInvitationOut, WorkspaceParams } from './shapes.ts';

export const createInvitation = defineRoute({
  method: 'POST',
  path: '/v1/workspaces/:workspaceId/invitations',
  operationId: 'createInvitation',
  summary: 'Invite someone by e-mail as admin or member (owner or admin); the token is returned once. 409 for a member or an e-mail already invited',
  description:
    'Invites an e-mail address to a workspace as admin or member; owners and admins only. The invitation token is returned in this answer only. An address that is already a member or already has a pending invitation is 409.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  params: WorkspaceParams,
  body: InvitationIn,
  responses: { 201: CreatedInvitationOut },
  handler: async ({ auth, params, body, services }) => {
    const { userId } = requireSession(auth, 'invite members');
    const email = body.email.trim().toLowerCase();
    const now = services.clock.now();
    const token = newInvitationToken();
    const invitation: Invitation = {
      id: newId('inv', now),
      workspaceId: params.workspaceId,
      email,
      role: body.role ?? 'member',
      tokenHash: invitationTokenHash(token),
      status: 'pending',
      invitedBy: userId,
      createdAt: new Date(now),
      expiresAt: new Date(now + INVITATION_TTL_MS),
      acceptedAt: null,
      acceptedBy: null,
    };
    try {
      await inTransaction(openUnit(services.db), async (tx) => {
        const access = await openWorkspace(tx, auth, params.workspaceId, { lock: true });
        requireRole(access, MANAGERS, 'invite members');
        const user = await findUserByEmail(tx, email);
        if (user && (await findMember(tx, params.workspaceId, user.id))) {
          throw new ApiError('conflict', `${email} is already a member of this workspace.`);
        }
        const pending = await findPendingInvitation(tx, params.workspaceId, email);
        if (pending && pending.expiresAt.getTime() > now) {
          throw new ApiError('conflict', `${email} already has a pending invitation (${pending.id}); cancel it to invite again.`);
        }
        // An expired invitation still holds the one-pending-per-e-mail slot: retire it.
        if (pending) await retireInvitation(tx, pending.id);
        await insertInvitation(tx, invitation);
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new ApiError('conflict', `${email} already has a pending invitation.`);
      throw error;
    }
    return { status: 201, body: { ...toInvitationOut(invitation, now), token } };
  },
});

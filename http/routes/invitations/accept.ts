import { LockMode } from '@mikro-orm/core';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { InvitationEntity } from '../../../persistence/entities/invitation.ts';
import { UserEntity } from '../../../persistence/entities/user.ts';
import { WorkspaceEntity } from '../../../persistence/entities/workspace.ts';
import { WorkspaceMemberEntity } from '../../../persistence/entities/workspace-member.ts';
import { requireSession } from '../workspaces/access.ts';
import { INVITATION_TOKEN_PATTERN, invitationTokenHash } from '../workspaces/invitation-tokens.ts';
import { toWorkspaceOut, WorkspaceOut } from '../workspaces/shapes.ts';

const AcceptInvitationIn = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 256, description: 'The token returned when the invitation was made (what the invitation e-mail carries).' }),
  },
  { additionalProperties: false },
);

export const acceptInvitation = defineRoute({
  method: 'POST',
  path: '/v1/invitations/accept',
  operationId: 'acceptInvitation',
  summary: 'Join a workspace with an invitation token, signed in with the invited e-mail; 409 when used, cancelled or expired',
  description:
    "Joins the workspace of an invitation token, as the role it names. The signed-in user's e-mail address must be the invited one (403 otherwise); a token used, cancelled or expired is 409, and an unknown one 404.",
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  errors: ['not_found', 'conflict'],
  // The workspace comes from the token; an API key is refused anyway (accepting is for people).
  keyWorkspace: 'none',
  body: AcceptInvitationIn,
  responses: { 200: WorkspaceOut },
  handler: async ({ auth, body, services }) => {
    const { userId } = requireSession(auth, 'accept invitations');
    if (!INVITATION_TOKEN_PATTERN.test(body.token)) throw new ApiError('not_found', 'No invitation has this token.');
    const now = services.clock.now();
    const out = await services.db.em().transactional(async (tx) => {
      const found = await tx.findOne(InvitationEntity, { tokenHash: invitationTokenHash(body.token) });
      if (!found) throw new ApiError('not_found', 'No invitation has this token.');
      // Lock the workspace before reading the invitation's state: cancel and invite take the same lock
      // first, so the three are serialised without ever locking in opposite orders.
      const workspace = await tx.findOne(WorkspaceEntity, { id: found.workspaceId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      const invitation = await tx.findOne(InvitationEntity, { id: found.id }, { refresh: true });
      if (!workspace || !invitation) throw new ApiError('not_found', 'No invitation has this token.');
      if (invitation.status === 'accepted') throw new ApiError('conflict', 'This invitation has already been used.');
      if (invitation.status === 'cancelled') throw new ApiError('conflict', 'This invitation was cancelled.');
      if (invitation.expiresAt.getTime() <= now) throw new ApiError('conflict', 'This invitation has expired; ask for a new one.');
      const user = await tx.findOneOrFail(UserEntity, { id: userId });
      if (user.email.toLowerCase() !== invitation.email) {
        throw new ApiError('forbidden', 'This invitation was sent to another e-mail address; sign in with that address to accept it.');
      }
      if (await tx.findOne(WorkspaceMemberEntity, { workspaceId: workspace.id, userId })) {
        throw new ApiError('conflict', 'You are already a member of this workspace.');
      }
      await tx.insert(WorkspaceMemberEntity, { workspaceId: workspace.id, userId, role: invitation.role, createdAt: new Date(now) });
      await tx.nativeUpdate(InvitationEntity, { id: invitation.id }, { status: 'accepted', acceptedAt: new Date(now), acceptedBy: userId });
      return toWorkspaceOut(workspace, invitation.role);
    });
    return { body: out };
  },
});

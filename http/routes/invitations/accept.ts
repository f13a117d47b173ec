import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { findUserOrFail } from '../../../persistence/stores/identity.ts';
import {
  findInvitationByToken,
  findMember,
  findWorkspace,
  insertMember,
  markInvitationAccepted,
  refreshInvitation,
} from '../../../persistence/stores/workspaces.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
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
    const out = await inTransaction(openUnit(services.db), async (tx) => {
      const found = await findInvitationByToken(tx, invitationTokenHash(body.token));
      if (!found) throw new ApiError('not_found', 'No invitation has this token.');
      // Lock the workspace before reading the invitation's state: cancel and invite take the same lock
      // first, so the three are serialised without ever locking in opposite orders.
      const workspace = await findWorkspace(tx, found.workspaceId, { lock: true });
      const invitation = await refreshInvitation(tx, found.id);
      if (!workspace || !invitation) throw new ApiError('not_found', 'No invitation has this token.');
      if (invitation.status === 'accepted') throw new ApiError('conflict', 'This invitation has already been used.');
      if (invitation.status === 'cancelled') throw new ApiError('conflict', 'This invitation was cancelled.');
      if (invitation.expiresAt.getTime() <= now) throw new ApiError('conflict', 'This invitation has expired; ask for a new one.');
      const user = await findUserOrFail(tx, userId);
      if (user.email.toLowerCase() !== invitation.email) {
        throw new ApiError('forbidden', 'This invitation was sent to another e-mail address; sign in with that address to accept it.');
      }
      if (await findMember(tx, workspace.id, userId)) {
        throw new ApiError('conflict', 'You are already a member of this workspace.');
      }
      await insertMember(tx, { workspaceId: workspace.id, userId, role: invitation.role, createdAt: new Date(now) });
      await markInvitationAccepted(tx, invitation.id, new Date(now), userId);
      return toWorkspaceOut(workspace, invitation.role);
    });
    return { body: out };
  },
});

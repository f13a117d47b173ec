import { Type, type Static } from '@sinclair/typebox';
import type { User } from '../../../persistence/stores/identity.ts';
import type { Invitation, Role, Workspace, WorkspaceMember } from '../../../persistence/stores/workspaces.ts';

/** Request and response shapes of workspaces, members and invitations, with the one mapper from row to Out each. */

const Id = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });
const Time = (description: string) => Type.String({ format: 'date-time', description });

export const WorkspaceName = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S', description: '1 to 100 characters, not only spaces; trimmed.' });
export const Email = Type.String({ format: 'email', maxLength: 254, description: 'Compared without regard to case; stored in lower case.' });
/** A string of a fixed set as a plain JSON Schema enum, so a wrong value is answered with the allowed ones. */
function StringEnum<const T extends readonly string[]>(values: T, options: { description?: string; default?: T[number] } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

export const RoleName = StringEnum(['owner', 'admin', 'member']);
export const AssignableRole = StringEnum(['admin', 'member'], { description: 'owner is given only by POST /v1/workspaces/:workspaceId/transfer.' });

export const WorkspaceParams = Type.Object({ workspaceId: Id('Workspace id (ws_…).') }, { additionalProperties: false });
export const MemberParams = Type.Object({ workspaceId: Id('Workspace id (ws_…).'), userId: Id('User id (usr_…).') }, { additionalProperties: false });
export const InvitationParams = Type.Object(
  { workspaceId: Id('Workspace id (ws_…).'), invitationId: Id('Invitation id (inv_…).') },
  { additionalProperties: false },
);

export const WorkspaceIn = Type.Object({ name: WorkspaceName }, { additionalProperties: false });
export const WorkspacePatch = Type.Object({ name: Type.Optional(WorkspaceName) }, { additionalProperties: false, minProperties: 1 });

export const WorkspaceOut = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    plan: Type.String({ description: 'free, pro or team.' }),
    personal: Type.Boolean({ description: 'The workspace made at sign-up.' }),
    role: Type.Union([RoleName, Type.Null()], { description: "The caller's role; null when the caller is an API key." }),
    createdAt: Time('When the workspace was made.'),
    updatedAt: Time('Last change of its settings.'),
  },
  { additionalProperties: false },
);
export type WorkspaceOut = Static<typeof WorkspaceOut>;

export function toWorkspaceOut(workspace: Workspace, role: Role | null): WorkspaceOut {
  return {
    id: workspace.id,
    name: workspace.name,
    plan: workspace.plan,
    personal: workspace.personal,
    role,
    createdAt: workspace.createdAt.toISOString(),
    updatedAt: workspace.updatedAt.toISOString(),
  };
}

export const MemberOut = Type.Object(
  {
    userId: Type.String(),
    email: Type.String(),
    name: Type.String(),
    role: RoleName,
    joinedAt: Time('When the user joined the workspace.'),
  },
  { additionalProperties: false },
);
export type MemberOut = Static<typeof MemberOut>;

export function toMemberOut(member: WorkspaceMember, user: Pick<User, 'email' | 'name'>): MemberOut {
  return { userId: member.userId, email: user.email, name: user.name, role: member.role, joinedAt: member.createdAt.toISOString() };
}

export const MemberPatch = Type.Object({ role: AssignableRole }, { additionalProperties: false });
export const TransferIn = Type.Object({ userId: Id('The member who becomes owner; the current owner becomes admin.') }, { additionalProperties: false });

export const InvitationIn = Type.Object(
  {
    email: Email,
    role: Type.Optional(StringEnum(['admin', 'member'], { default: 'member', description: 'Role given on acceptance; default member.' })),
  },
  { additionalProperties: false },
);

export const InvitationOut = Type.Object(
  {
    id: Type.String(),
    workspaceId: Type.String(),
    email: Type.String(),
    role: AssignableRole,
    status: StringEnum(['pending', 'accepted', 'cancelled', 'expired'], {
      description: 'expired: still pending past expiresAt; it can no longer be accepted.',
    }),
    invitedBy: Type.Union([Type.String(), Type.Null()], { description: 'User id of who invited; null once that user is deleted.' }),
    createdAt: Time('When the invitation was made.'),
    expiresAt: Time('After this it cannot be accepted.'),
    acceptedAt: Type.Union([Time('When it was accepted.'), Type.Null()]),
  },
  { additionalProperties: false },
);
export type InvitationOut = Static<typeof InvitationOut>;

export const CreatedInvitationOut = Type.Composite(
  [
    InvitationOut,
    Type.Object({
      token: Type.String({
        description: 'Shown once, never again: the secret the invitee gives to POST /v1/invitations/accept. It is what the invitation e-mail would carry.',
      }),
    }),
  ],
  { additionalProperties: false },
);

export function invitationStatus(invitation: Invitation, now: number): InvitationOut['status'] {
  return invitation.status === 'pending' && invitation.expiresAt.getTime() <= now ? 'expired' : invitation.status;
}

export function toInvitationOut(invitation: Invitation, now: number): InvitationOut {
  return {
    id: invitation.id,
    workspaceId: invitation.workspaceId,
    email: invitation.email,
    role: invitation.role,
    status: invitationStatus(invitation, now),
    invitedBy: invitation.invitedBy,
    createdAt: invitation.createdAt.toISOString(),
    expiresAt: invitation.expiresAt.toISOString(),
    acceptedAt: invitation.acceptedAt ? invitation.acceptedAt.toISOString() : null,
  };
}

import { EntitySchema } from '@mikro-orm/core';

export const INVITATION_ROLES = ['admin', 'member'] as const;
export type InvitationRole = (typeof INVITATION_ROLES)[number];

/** Stored states; `expired` is not stored but derived from expiresAt while the row is still pending. */
export type InvitationStatus = 'pending' | 'accepted' | 'cancelled';

/** An invitation to join a workspace by e-mail; only the SHA-256 hex of its token is stored. */
export interface Invitation {
  id: string;
  workspaceId: string;
  /** Trimmed and in lower case. */
  email: string;
  role: InvitationRole;
  tokenHash: string;
  status: InvitationStatus;
  invitedBy: string | null;
  createdAt: Date;
  expiresAt: Date;
  acceptedAt: Date | null;
  acceptedBy: string | null;
}

export const InvitationEntity = new EntitySchema<Invitation>({
  name: 'Invitation',
  tableName: 'invitations',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string', fieldName: 'workspace_id' },
    email: { type: 'string' },
    role: { type: 'string' },
    tokenHash: { type: 'string', fieldName: 'token_hash' },
    status: { type: 'string' },
    invitedBy: { type: 'string', fieldName: 'invited_by', nullable: true },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    expiresAt: { type: 'Date', fieldName: 'expires_at' },
    acceptedAt: { type: 'Date', fieldName: 'accepted_at', nullable: true },
    acceptedBy: { type: 'string', fieldName: 'accepted_by', nullable: true },
  },
});

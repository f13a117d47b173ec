import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../../auth/tokens.ts';

/** Invitations stay acceptable for 7 days. */
export const INVITATION_TTL_MS = 7 * 24 * 3_600_000;

/** `gsi_` and 32 random bytes in base64url: the secret an invitation e-mail would carry. */
export const INVITATION_TOKEN_PATTERN = /^gsi_[A-Za-z0-9_-]{43}$/;

export function newInvitationToken(): string {
  return `gsi_${randomBytes(32).toString('base64url')}`;
}

/** Only this is stored, so a leaked database cannot be used to join workspaces. */
export function invitationTokenHash(token: string): string {
  return sha256Hex(token);
}

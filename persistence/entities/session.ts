import { EntitySchema } from '@mikro-orm/core';

/** A dashboard session; only the SHA-256 of its cookie token is stored. */
export interface Session {
  id: string;
  userId: string;
  tokenHash: string;
  createdAt: Date;
  expiresAt: Date;
  lastSeenAt: Date;
  ip: string | null;
  userAgent: string | null;
}

export const SessionEntity = new EntitySchema<Session>({
  name: 'Session',
  tableName: 'sessions',
  properties: {
    id: { type: 'string', primary: true },
    userId: { type: 'string', fieldName: 'user_id' },
    tokenHash: { type: 'string', fieldName: 'token_hash' },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    expiresAt: { type: 'Date', fieldName: 'expires_at' },
    lastSeenAt: { type: 'Date', fieldName: 'last_seen_at' },
    ip: { type: 'string', nullable: true },
    userAgent: { type: 'string', fieldName: 'user_agent', nullable: true },
  },
});

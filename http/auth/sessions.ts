import type { Config } from '../../runtime/config.ts';
import type { Services } from '../services.ts';
import { newId } from '../../persistence/ids.ts';
import { deleteSession, findSessionByToken, insertSession, type Session } from '../../persistence/stores/identity.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { ApiError } from '../errors.ts';
import { newSessionToken, sha256Hex, SESSION_TOKEN_PATTERN } from './tokens.ts';

export const SESSION_COOKIE = 'gs_session';

/** Starts a session for a user; returns the Set-Cookie header value that carries its token. */
export async function startSession(
  services: Services,
  userId: string,
  client: { ip?: string; userAgent?: string } = {},
): Promise<{ session: Session; setCookie: string }> {
  const { clock, config } = services;
  const token = newSessionToken();
  const now = clock.now();
  const ttlMs = config.sessionTtlHours * 3_600_000;
  const session: Session = {
    id: newId('ses', now),
    userId,
    tokenHash: sha256Hex(token),
    createdAt: new Date(now),
    expiresAt: new Date(now + ttlMs),
    lastSeenAt: new Date(now),
    ip: client.ip?.slice(0, 64) ?? null,
    userAgent: client.userAgent?.slice(0, 512) ?? null,
  };
  await insertSession(openUnit(services.db), session);
  return { session, setCookie: sessionCookie(config, token, Math.floor(ttlMs / 1000)) };
}

/** The session a cookie token belongs to; an unknown token is 401, an expired one is deleted and 401. */
export async function resolveSession(services: Services, token: string): Promise<Session> {
  if (!SESSION_TOKEN_PATTERN.test(token)) throw new ApiError('unauthenticated', 'The session is not valid; sign in again.');
  const unit = openUnit(services.db);
  const session = await findSessionByToken(unit, sha256Hex(token));
  if (!session) throw new ApiError('unauthenticated', 'The session is not valid; sign in again.');
  if (session.expiresAt.getTime() <= services.clock.now()) {
    await deleteSession(unit, session.id);
    throw new ApiError('unauthenticated', 'The session has expired; sign in again.');
  }
  return session;
}

/** Ends a session for good: the row is deleted, so the token can never be used again. */
export async function endSession(services: Services, sessionId: string): Promise<void> {
  await deleteSession(openUnit(services.db), sessionId);
}

/** The gs_session token of a Cookie header, if any. */
export function readSessionToken(cookieHeader: string | undefined): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    if (part.slice(0, at).trim() === SESSION_COOKIE) return part.slice(at + 1).trim();
  }
  return undefined;
}

export function sessionCookie(config: Config, token: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${token}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${secure(config)}`;
}

/** Tells the browser to forget the cookie. */
export function clearedSessionCookie(config: Config): string {
  return `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax${secure(config)}`;
}

function secure(config: Config): string {
  return config.baseUrl.startsWith('https:') ? '; Secure' : '';
}

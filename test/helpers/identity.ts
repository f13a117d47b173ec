import { randomBytes } from 'node:crypto';
import type { TestServer } from './server.ts';
import type { Scope } from '../../http/route.ts';

export interface SignedUp {
  userId: string;
  workspaceId: string;
  email: string;
  password: string;
  /** `gs_session=…`, ready for a Cookie header. */
  cookie: string;
}

let counter = 0;

/** A unique e-mail address for a test. */
export function uniqueEmail(tag = 'user'): string {
  return `${tag}-${process.pid}-${++counter}-${randomBytes(3).toString('hex')}@example.com`;
}

/** The `gs_session=…` pair of a response's Set-Cookie, for a Cookie header. */
export function sessionCookieOf(response: { headers: Headers }): string {
  const setCookie = response.headers.get('set-cookie') ?? '';
  const match = /gs_session=([^;]*)/.exec(setCookie);
  if (!match || match[1] === '') throw new Error(`no gs_session cookie in ${JSON.stringify(setCookie)}`);
  return `gs_session=${match[1]}`;
}

/** Signs up a new user through POST /v1/auth/signup; returns their ids and session cookie. */
export async function signUp(server: TestServer, options: { email?: string; name?: string; password?: string } = {}): Promise<SignedUp> {
  const email = options.email ?? uniqueEmail();
  const password = options.password ?? `pw-${randomBytes(8).toString('hex')}`;
  const response = await server.json('/v1/auth/signup', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password, name: options.name ?? 'Test User' }),
  });
  if (response.status !== 201) throw new Error(`sign-up failed: ${response.status} ${JSON.stringify(response.body)}`);
  return { userId: response.body.user.id, workspaceId: response.body.workspace.id, email, password, cookie: sessionCookieOf(response) };
}

/** Signs in through POST /v1/auth/login; returns the new session cookie. */
export async function logIn(server: TestServer, email: string, password: string): Promise<string> {
  const response = await server.json('/v1/auth/login', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  if (response.status !== 200) throw new Error(`login failed: ${response.status} ${JSON.stringify(response.body)}`);
  return sessionCookieOf(response);
}

/** Creates an API key through POST /v1/api-keys with a session cookie; returns its id and plaintext. */
export async function createKey(
  server: TestServer,
  cookie: string,
  workspaceId: string,
  scopes: Scope[] = ['all'],
  options: { name?: string; expiresAt?: string } = {},
): Promise<{ id: string; key: string }> {
  const response = await server.json('/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie },
    body: JSON.stringify({ workspaceId, name: options.name ?? 'test key', scopes, ...(options.expiresAt ? { expiresAt: options.expiresAt } : {}) }),
  });
  if (response.status !== 201) throw new Error(`key creation failed: ${response.status} ${JSON.stringify(response.body)}`);
  return { id: response.body.id, key: response.body.key };
}

/** Headers for a JSON request with a session cookie or an API key. */
export function withCookie(cookie: string, extra: Record<string, string> = {}): Record<string, string> {
  return { 'content-type': 'application/json', cookie, ...extra };
}

export function withKey(key: string, extra: Record<string, string> = {}): Record<string, string> {
  return { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...extra };
}

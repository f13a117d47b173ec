import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';
import type { TestServer } from './server.ts';
import { SCOPES, type RouteDef, type Scope } from '../../http/route.ts';
import { isOpenAiPath } from '../../http/openai-errors.ts';

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

/**
 * The auth matrix (STYLE.md section 5): for each route, the requests that must be refused and how.
 * Every non-public route: no credentials, a made-up key, a malformed Authorization header, a revoked
 * key and an expired key are 401. A key on a dashboard route is 403. A key without the route's scope
 * is 403. A key of another workspace (for routes that take the key's workspace) is 403, and so is a
 * key naming no workspace. A session-cookie write from a foreign Origin is 403. A key with the right
 * scope and workspace is not refused by the auth layer (a control, so the 403s above mean something).
 * Path parameters are filled with the caller's workspace id (`:workspaceId`) or a made-up id, and the
 * workspace id is sent in the body of routes that take one, else in the query.
 * Keys are made fresh per route, so per-key rate limits never interfere.
 */
/** Our error codes as the OpenAI-compatible door names them. */
const OPENAI_CODES: Record<string, string> = { unauthenticated: 'invalid_api_key', forbidden: 'insufficient_permissions' };

export async function authMatrix(t: Test, server: TestServer, select: (route: RouteDef) => boolean = () => true): Promise<void> {
  const routes = server.http.router.routes.map((r) => r.def).filter((def) => def.access !== 'public' && select(def));
  const a = await signUp(server);
  const b = await signUp(server);
  const revoked = await createKey(server, a.cookie, a.workspaceId);
  const revoke = await server.json(`/v1/api-keys/${revoked.id}`, { method: 'DELETE', headers: withCookie(a.cookie) });
  if (revoke.status !== 200) throw new Error(`could not revoke: ${revoke.status}`);
  // Expired in the database before it is ever used, so no cached record hides the change.
  const expired = await createKey(server, a.cookie, a.workspaceId);
  await server.services.db.em().execute('update api_keys set expires_at = ? where id = ?', [new Date(server.services.clock.now() - 1000), expired.id]);
  const madeUp = `gs_live_${'Z'.repeat(64)}`;

  for (const route of routes) {
    await t.test(`${route.method} ${route.path}`, async (t) => {
      const hasBody = route.body !== undefined;
      const request = (headers: Record<string, string>, workspaceId: string | null = a.workspaceId) => {
        const path = route.path.replace(/:(\w+)/g, (_, name: string) => (name === 'workspaceId' ? a.workspaceId : `${name}_0000000000000000000000000`));
        const query = !hasBody && workspaceId ? `?workspaceId=${workspaceId}` : '';
        const body = hasBody ? JSON.stringify(workspaceId ? { workspaceId } : {}) : undefined;
        return server.json(`${path}${query}`, { method: route.method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body } : {}) });
      };
      const expect = async (label: string, res: Promise<{ status: number; body: any }>, status: number, code: string) => {
        const { status: got, body } = await res;
        t.equal(got, status, `${label}: ${status}`);
        // The OpenAI-compatible door answers in OpenAI's shape, with OpenAI's codes (docs/openai-compatible.md, Errors).
        const expected = isOpenAiPath(route.path) ? (OPENAI_CODES[code] ?? code) : code;
        t.equal(body?.error?.code, expected, `${label}: ${expected}`);
      };

      await expect('no credentials', request({}), 401, 'unauthenticated');
      await expect('made-up key', request({ authorization: `Bearer ${madeUp}` }), 401, 'unauthenticated');
      await expect('malformed Authorization', request({ authorization: 'Basic dXNlcjpwYXNz' }), 401, 'unauthenticated');
      await expect('revoked key', request({ authorization: `Bearer ${revoked.key}` }), 401, 'unauthenticated');
      await expect('expired key', request({ authorization: `Bearer ${expired.key}` }), 401, 'unauthenticated');
      await expect('unknown session cookie', request({ cookie: `gs_session=${'A'.repeat(43)}` }), 401, 'unauthenticated');

      if (route.access === 'dashboard') {
        const key = await createKey(server, a.cookie, a.workspaceId, ['all']);
        await expect('key on a dashboard route', request(withKey(key.key)), 403, 'forbidden');
      } else {
        const scopes = typeof route.access === 'object' ? route.access.scopes : undefined;
        if (scopes) {
          const wrong = SCOPES.find((s) => s !== 'all' && !scopes.includes(s) && !(s === 'usage.read' && scopes.includes('wallet.read')))!;
          const key = await createKey(server, a.cookie, a.workspaceId, [wrong]);
          await expect(`key with scope ${wrong} only`, request(withKey(key.key)), 403, 'forbidden');
        }
        if ((route.keyWorkspace ?? 'required') === 'required') {
          const other = await createKey(server, b.cookie, b.workspaceId, ['all']);
          await expect('key of another workspace', request(withKey(other.key)), 403, 'forbidden');
          if (!route.path.includes(':workspaceId')) {
            const own = await createKey(server, a.cookie, a.workspaceId, ['all']);
            await expect('key naming no workspace', request(withKey(own.key), null), 403, 'forbidden');
          }
        }
        if (scopes) {
          const right = await createKey(server, a.cookie, a.workspaceId, [scopes[0]!]);
          const res = await request(withKey(right.key));
          t.not(res.status, 401, 'control: a key with the scope is authenticated');
          t.notMatch(res.body?.error?.message ?? '', /scope|another workspace|workspace id/, 'control: and passes the scope and workspace checks');
        }
      }
      if (route.method !== 'GET') {
        await expect('cookie write from a foreign Origin', request({ cookie: a.cookie, origin: 'https://evil.example' }), 403, 'forbidden');
      }
    });
  }
}

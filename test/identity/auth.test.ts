import t, { type Test } from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { authMatrix, createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { authProbeRoutes } from './auth-probe-routes.ts';
import type { Scope } from '../../http/route.ts';

async function setup(t: Test) {
  const server = await startTestServer(t, { routes: authProbeRoutes(), env: { RATE_LIMIT_FREE: '100000' } });
  const a = await signUp(server);
  const b = await signUp(server);
  return { server, a, b };
}

function call(server: TestServer, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  return server.json(path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

t.test('a key resolves to its principal; a session to its user', async (t) => {
  const { server, a } = await setup(t);
  const key = await createKey(server, a.cookie, a.workspaceId, ['generations.read', 'assets.read']);
  const res = await server.json(`/v1/probe/generations?workspaceId=${a.workspaceId}`, { headers: withKey(key.key) });
  t.equal(res.status, 200);
  t.same(res.body.auth, { kind: 'key', keyId: key.id, workspaceId: a.workspaceId, scopes: ['generations.read', 'assets.read'] });
  const session = await server.json('/v1/probe/any', { headers: withCookie(a.cookie) });
  t.equal(session.status, 200);
  t.match(session.body.auth, { kind: 'session', userId: a.userId, sessionId: /^ses_/ });
  t.equal(session.headers.get('x-ratelimit-limit'), null);
});

t.test("scopes: the route's scope or all; wallet.read also accepts usage.read; anything else is 403", async (t) => {
  const { server, a } = await setup(t);
  const cases: Array<[string, Scope[], number]> = [
    ['/v1/probe/generations', ['generations.read'], 200],
    ['/v1/probe/generations', ['all'], 200],
    ['/v1/probe/generations', ['generations.write'], 403],
    ['/v1/probe/generations', ['usage.read', 'assets.read', 'files.write', 'wallet.read', 'wallet.write', 'webhooks.manage'], 403],
    ['/v1/probe/wallet', ['wallet.read'], 200],
    ['/v1/probe/wallet', ['usage.read'], 200],
    ['/v1/probe/wallet', ['wallet.write'], 403],
    ['/v1/probe/wallet', ['all'], 200],
    ['/v1/probe/either', ['assets.read'], 200],
    ['/v1/probe/either', ['files.write'], 200],
    ['/v1/probe/either', ['usage.read'], 403],
    ['/v1/probe/any', ['webhooks.manage'], 200],
    ['/v1/probe/no-workspace', ['usage.read'], 200],
  ];
  for (const [path, scopes, status] of cases) {
    const key = await createKey(server, a.cookie, a.workspaceId, scopes);
    const res = await server.json(`${path}?workspaceId=${a.workspaceId}`, { headers: withKey(key.key) });
    t.equal(res.status, status, `${path} with ${scopes.join(',')}`);
    if (status === 403) {
      t.equal(res.body.error.code, 'forbidden');
      t.match(res.body.error.message, /scope/);
    }
  }
  const writer = await createKey(server, a.cookie, a.workspaceId, ['generations.write']);
  t.equal((await call(server, 'POST', '/v1/probe/generations', withKey(writer.key), { workspaceId: a.workspaceId })).status, 200);
  const reader = await createKey(server, a.cookie, a.workspaceId, ['generations.read']);
  t.equal((await call(server, 'POST', '/v1/probe/generations', withKey(reader.key), { workspaceId: a.workspaceId })).status, 403, 'read scope cannot write');
  t.equal((await server.json(`/v1/probe/generations?workspaceId=${a.workspaceId}`, { headers: withCookie(a.cookie) })).status, 200, 'sessions need no scope');
});

t.test('a keyed request must carry its own workspace id, in path, query or body; any other is 403', async (t) => {
  const { server, a, b } = await setup(t);
  const key = await createKey(server, a.cookie, a.workspaceId, ['all']);
  const h = withKey(key.key);
  const cases: Array<[string, string, unknown, number, RegExp?]> = [
    ['GET', `/v1/probe/generations?workspaceId=${a.workspaceId}`, undefined, 200],
    ['GET', '/v1/probe/generations', undefined, 403, /must carry its workspace id/],
    ['GET', `/v1/probe/generations?workspaceId=${b.workspaceId}`, undefined, 403, /another workspace/],
    ['GET', `/v1/probe/generations?workspaceId=${a.workspaceId}&workspaceId=${b.workspaceId}`, undefined, 403],
    ['GET', `/v1/probe/generations?workspaceId=`, undefined, 403],
    ['POST', '/v1/probe/generations', { workspaceId: a.workspaceId }, 200],
    ['POST', '/v1/probe/generations', { n: 1 }, 403, /must carry its workspace id/],
    ['POST', '/v1/probe/generations', { workspaceId: b.workspaceId }, 403, /another workspace/],
    ['POST', `/v1/probe/generations?workspaceId=${a.workspaceId}`, { workspaceId: b.workspaceId }, 403, /another workspace/],
    ['POST', `/v1/probe/generations?workspaceId=${a.workspaceId}`, { n: 1 }, 200],
    ['GET', `/v1/probe/ws/${a.workspaceId}/storage`, undefined, 200],
    ['GET', `/v1/probe/ws/${b.workspaceId}/storage`, undefined, 403, /another workspace/],
    ['GET', `/v1/probe/ws/${a.workspaceId}/storage?workspaceId=${b.workspaceId}`, undefined, 403],
    ['GET', `/v1/probe/ws/${encodeURIComponent(a.workspaceId)}/storage`, undefined, 200],
    ['GET', '/v1/probe/no-workspace', undefined, 200],
    ['GET', `/v1/probe/no-workspace?workspaceId=${b.workspaceId}`, undefined, 200],
  ];
  for (const [method, path, body, status, message] of cases) {
    const res = await call(server, method, path, h, body);
    t.equal(res.status, status, `${method} ${path} ${JSON.stringify(body ?? '')}`);
    if (message) t.match(res.body.error.message, message);
  }
  const session = await server.json(`/v1/probe/generations?workspaceId=${b.workspaceId}`, { headers: withCookie(a.cookie) });
  t.equal(session.status, 200, 'sessions are not checked here; handlers check membership');
});

t.test('credentials: Bearer keys (scheme in any case), cookies, and what is refused', async (t) => {
  const { server, a } = await setup(t);
  const key = await createKey(server, a.cookie, a.workspaceId, ['all']);
  const path = `/v1/probe/any?workspaceId=${a.workspaceId}`;
  const ok = async (headers: Record<string, string>, label: string) => t.equal((await server.json(path, { headers })).status, 200, label);
  const refused = async (headers: Record<string, string>, label: string, message?: RegExp) => {
    const res = await server.json(path, { headers });
    t.equal(res.status, 401, label);
    t.equal(res.body.error.code, 'unauthenticated', label);
    t.same(Object.keys(res.body.error).sort(), ['code', 'message', 'requestId']);
    if (message) t.match(res.body.error.message, message, label);
  };
  await ok({ authorization: `Bearer ${key.key}` }, 'Bearer');
  await ok({ authorization: `bearer ${key.key}` }, 'bearer');
  await ok({ cookie: a.cookie }, 'cookie');
  await ok({ cookie: `theme=dark; ${a.cookie}; other=1` }, 'cookie among others');
  await refused({}, 'nothing', /Authorization: Bearer/);
  await refused({ authorization: key.key }, 'no scheme');
  await refused({ authorization: `Basic ${Buffer.from(`x:${key.key}`).toString('base64')}` }, 'Basic');
  await refused({ authorization: 'Bearer' }, 'empty Bearer');
  await refused({ authorization: `Bearer ${key.key}x` }, 'too long a key', /not valid/);
  await refused({ authorization: `Bearer ${key.key.slice(0, -1)}!` }, 'a character outside [A-Za-z0-9]', /not valid/);
  await refused({ authorization: `Bearer gs_test_${key.key.slice(8)}` }, 'another prefix', /not valid/);
  await refused({ authorization: `Bearer ${key.key.slice(0, -1)}${key.key.endsWith('a') ? 'b' : 'a'}` }, 'one character off', /not valid/);
  await refused({ authorization: `Bearer ${'x'.repeat(10)}`, cookie: a.cookie }, 'a bad key is not rescued by a good cookie');
});

t.test('dashboard routes refuse keys (403) and accept sessions', async (t) => {
  const { server, a } = await setup(t);
  const key = await createKey(server, a.cookie, a.workspaceId, ['all']);
  const res = await server.json(`/v1/probe/dashboard?workspaceId=${a.workspaceId}`, { headers: withKey(key.key) });
  t.equal(res.status, 403);
  t.match(res.body.error.message, /dashboard/);
  t.equal(res.headers.get('x-ratelimit-limit'), '100000', 'a known key gets its limit headers even when refused');
  t.equal((await server.json('/v1/probe/dashboard', { headers: withCookie(a.cookie) })).status, 200);
});

t.test('the Origin check covers every cookie write, and only cookie writes', async (t) => {
  const { server, a } = await setup(t);
  const key = await createKey(server, a.cookie, a.workspaceId, ['all']);
  const evil = { origin: 'https://evil.example' };
  t.equal((await call(server, 'POST', '/v1/probe/dashboard', withCookie(a.cookie, evil), {})).status, 403, 'cookie POST from a foreign origin');
  t.equal((await call(server, 'POST', '/v1/probe/generations', withCookie(a.cookie, evil), {})).status, 403, 'also on scoped routes');
  t.equal((await server.json('/v1/probe/dashboard', { headers: withCookie(a.cookie, evil) })).status, 200, 'reads are not writes');
  t.equal(
    (await call(server, 'POST', '/v1/probe/generations', withKey(key.key, evil), { workspaceId: a.workspaceId })).status,
    200,
    'keys are not sent by browsers on their own: no Origin check',
  );
  t.equal((await call(server, 'POST', '/v1/probe/dashboard', withCookie(a.cookie, { origin: new URL(server.config.baseUrl).origin }), {})).status, 200);
  t.equal((await call(server, 'POST', '/v1/probe/dashboard', withCookie(a.cookie), {})).status, 200, 'no Origin: not a browser');
});

t.test('authentication comes before the body: an unauthenticated caller gets 401, not 400', async (t) => {
  const { server } = await setup(t);
  for (const [label, body, headers] of [
    ['no body', undefined, {}],
    ['not JSON', '{oops', { 'content-type': 'application/json' }],
    ['wrong type', JSON.stringify({ n: 'x' }), { 'content-type': 'application/json' }],
  ] as Array<[string, string | undefined, Record<string, string>]>) {
    const res = await server.json('/v1/probe/generations', { method: 'POST', headers, ...(body ? { body } : {}) });
    t.equal(res.status, 401, label);
  }
});

t.test('auth matrix over the probe routes', async (t) => {
  const { server } = await setup(t);
  await authMatrix(t, server, (route) => route.path.startsWith('/v1/probe/'));
});

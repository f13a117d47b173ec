import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { sharedTestServer, startTestServer, type TestServer } from '../helpers/server.ts';
import { logIn, sessionCookieOf, signUp, uniqueEmail, withCookie } from '../helpers/identity.ts';
import { sha256Hex } from '../../http/auth/tokens.ts';
import { purgeExpiredSessions, SESSION_PURGE_INTERVAL_MS } from '../../http/auth/session-retention.ts';
import { eventually } from '../helpers/eventually.ts';

const json = { 'content-type': 'application/json' };

function post(server: TestServer, path: string, body: unknown, headers: Record<string, string> = json) {
  return server.json(path, { method: 'POST', headers, body: JSON.stringify(body) });
}

async function rows<T = any>(server: TestServer, sql: string, params: unknown[] = []): Promise<T[]> {
  return server.services.db.em().execute(sql, params);
}

/** A route any session may call: logout is dashboard-only, so a probe of its own is simpler. */
async function whoAmI(server: TestServer, cookie: string) {
  return server.json('/v1/auth/logout', { method: 'POST', headers: { cookie } });
}

t.test('sign-up creates the user, a personal workspace they own on the free plan, a password account and a session', async (t) => {
  const server = await sharedTestServer();
  const email = uniqueEmail('Signup').replace('signup', 'SignUp');
  const res = await post(server, '/v1/auth/signup', { email: `  ${email}`.trim(), password: 'correct horse battery', name: ' Ada Lovelace ' });
  t.equal(res.status, 201);
  t.match(res.body.user, { id: /^usr_[0-9a-z]{26}$/, email: email.toLowerCase(), name: 'Ada Lovelace' });
  t.match(res.body.workspace, { id: /^ws_[0-9a-z]{26}$/, plan: 'free' });
  t.notOk('passwordHash' in res.body.user, 'no hash in the answer');
  t.equal(res.headers.get('cache-control'), 'no-store');

  const setCookie = res.headers.get('set-cookie')!;
  t.match(setCookie, /^gs_session=[A-Za-z0-9_-]{43}; /);
  t.match(setCookie, /; HttpOnly/);
  t.match(setCookie, /; SameSite=Lax/);
  t.match(setCookie, /; Path=\//);
  t.match(setCookie, new RegExp(`; Max-Age=${14 * 24 * 3600}`), '14 days by default');
  t.notMatch(setCookie, /Secure/, 'not Secure on an http base URL');

  const userId = res.body.user.id;
  const [user] = await rows(server, 'select email, password_hash from users where id = ?', [userId]);
  t.equal(user.email, email.toLowerCase());
  t.match(user.password_hash, /^scrypt\$\d+\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
  t.notMatch(user.password_hash, /correct horse/);
  const [member] = await rows(
    server,
    'select m.role, w.plan, w.personal from workspace_members m join workspaces w on w.id = m.workspace_id where m.user_id = ?',
    [userId],
  );
  t.same(member, { role: 'owner', plan: 'free', personal: true });
  const accounts = await rows(server, 'select provider from linked_accounts where user_id = ?', [userId]);
  t.same(
    accounts.map((a) => a.provider),
    ['password'],
  );
  const token = sessionCookieOf(res).split('=')[1]!;
  const sessions = await rows(server, 'select token_hash from sessions where user_id = ?', [userId]);
  t.same(
    sessions.map((s) => s.token_hash),
    [sha256Hex(token)],
    'only the hash of the token is stored',
  );
});

t.test('sign-up refuses bad input and a taken e-mail, and then changes nothing', async (t) => {
  const server = await startTestServer(t);
  const taken = await signUp(server);
  const cases: Array<[string, unknown, number, string, RegExp]> = [
    ['malformed e-mail', { email: 'not-an-email', password: 'long enough', name: 'A' }, 400, 'validation_error', /body\.email/],
    ['e-mail without domain', { email: 'a@', password: 'long enough', name: 'A' }, 400, 'validation_error', /body\.email/],
    ['over-long e-mail', { email: `${'a'.repeat(250)}@example.com`, password: 'long enough', name: 'A' }, 400, 'validation_error', /body\.email/],
    ['short password', { email: uniqueEmail(), password: 'short', name: 'A' }, 400, 'validation_error', /body\.password/],
    ['over-long password', { email: uniqueEmail(), password: 'x'.repeat(257), name: 'A' }, 400, 'validation_error', /body\.password/],
    ['over-long name', { email: uniqueEmail(), password: 'long enough', name: 'n'.repeat(101) }, 400, 'validation_error', /body\.name/],
    ['blank name', { email: uniqueEmail(), password: 'long enough', name: '   ' }, 400, 'validation_error', /body\.name/],
    ['name of the wrong type', { email: uniqueEmail(), password: 'long enough', name: 42 }, 400, 'validation_error', /body\.name/],
    ['missing password', { email: uniqueEmail(), name: 'A' }, 400, 'validation_error', /body\.password/],
    ['unknown field', { email: uniqueEmail(), password: 'long enough', name: 'A', role: 'admin' }, 400, 'validation_error', /unknown field "role"/],
    ['taken e-mail, other case', { email: taken.email.toUpperCase(), password: 'long enough', name: 'A' }, 409, 'conflict', /already exists/],
  ];
  for (const [label, body, status, code, message] of cases) {
    const res = await post(server, '/v1/auth/signup', body);
    t.equal(res.status, status, label);
    t.equal(res.body.error.code, code, label);
    t.match(res.body.error.message, message, label);
    t.notOk(res.headers.get('set-cookie'), `${label}: no session`);
  }
  const [counts] = await rows(
    server,
    `select (select count(*)::int from users) as users, (select count(*)::int from workspaces) as workspaces,
    (select count(*)::int from sessions) as sessions, (select count(*)::int from linked_accounts) as accounts`,
  );
  t.same(counts, { users: 1, workspaces: 1, sessions: 1, accounts: 1 }, 'only the first sign-up left rows');
});

t.test('login starts a new session; an unknown e-mail and a wrong password get the same 401', async (t) => {
  const server = await sharedTestServer();
  const user = await signUp(server, { password: 'the right password' });
  const res = await post(server, '/v1/auth/login', { email: user.email.toUpperCase(), password: 'the right password' });
  t.equal(res.status, 200);
  t.same(res.body.user.id, user.userId);
  const cookie = sessionCookieOf(res);
  t.not(cookie, user.cookie, 'a new session, not the sign-up one');
  t.equal((await whoAmI(server, cookie)).status, 204, 'the new session works');

  const wrong = await post(server, '/v1/auth/login', { email: user.email, password: 'the wrong password' });
  const unknown = await post(server, '/v1/auth/login', { email: uniqueEmail('nobody'), password: 'the right password' });
  t.equal(wrong.status, 401);
  t.equal(unknown.status, 401);
  t.equal(wrong.body.error.code, 'unauthenticated');
  t.equal(wrong.body.error.message, unknown.body.error.message, 'the same message either way');
  t.notOk(wrong.headers.get('set-cookie'));

  const bad = await post(server, '/v1/auth/login', { email: user.email, password: 123 });
  t.equal(bad.status, 400);
  t.equal(bad.body.error.code, 'validation_error');
});

t.test('a session cookie works until logout; logout deletes the session, so the cookie is dead', async (t) => {
  const server = await sharedTestServer();
  const user = await signUp(server);
  const second = await logIn(server, user.email, user.password);
  const res = await whoAmI(server, user.cookie);
  t.equal(res.status, 204);
  t.match(res.headers.get('set-cookie'), /^gs_session=; Path=\/; Max-Age=0/);
  const again = await whoAmI(server, user.cookie);
  t.equal(again.status, 401, 'the logged-out cookie is refused');
  t.equal(again.body.error.code, 'unauthenticated');
  const left = await rows(server, 'select id from sessions where user_id = ?', [user.userId]);
  t.equal(left.length, 1, 'only the other session is left');
  t.equal((await whoAmI(server, second)).status, 204, 'the other session was not touched');
});

t.test('missing, malformed and unknown session cookies are 401', async (t) => {
  const server = await sharedTestServer();
  for (const cookie of [undefined, 'gs_session=', 'gs_session=short', `gs_session=${'A'.repeat(43)}`, 'other=1']) {
    const res = await server.json('/v1/auth/logout', { method: 'POST', headers: cookie ? { cookie } : {} });
    t.equal(res.status, 401, String(cookie));
    t.equal(res.body.error.code, 'unauthenticated');
  }
});

t.test('sessions expire after SESSION_TTL_HOURS; an expired one is refused and deleted', async (t) => {
  const clock = new ManualClock();
  const server = await startTestServer(t, { clock, env: { SESSION_TTL_HOURS: '2' } });
  const user = await signUp(server);
  const [session] = await rows(server, 'select created_at, expires_at from sessions where user_id = ?', [user.userId]);
  t.equal(new Date(session.expires_at).getTime() - new Date(session.created_at).getTime(), 2 * 3_600_000);
  clock.advance(2 * 3_600_000 - 1_000);
  const second = await logIn(server, user.email, user.password);
  clock.advance(1_000);
  const res = await whoAmI(server, user.cookie);
  t.equal(res.status, 401);
  t.match(res.body.error.message, /expired/);
  const left = await rows(server, 'select id from sessions where user_id = ?', [user.userId]);
  t.equal(left.length, 1, 'the expired session row is gone, the younger one stays');
  t.equal((await whoAmI(server, second)).status, 204);
});

t.test('expired sessions whose cookie never comes back are purged by the service; live ones stay', async (t) => {
  const clock = new ManualClock();
  const server = await startTestServer(t, { clock, env: { SESSION_TTL_HOURS: '2' } });
  const early = await signUp(server);
  clock.advance(3_600_000);
  const late = await signUp(server);
  const left = async () =>
    (await rows<{ user_id: string }>(server, 'select user_id from sessions where user_id in (?, ?)', [early.userId, late.userId])).map((row) => row.user_id);
  t.same((await left()).sort(), [early.userId, late.userId].sort());
  // The early session expires at 2 h, the late one at 3 h; a purge (every SESSION_PURGE_INTERVAL_MS) falls due between.
  clock.advance(3_600_000 + SESSION_PURGE_INTERVAL_MS);
  const now = await eventually(
    async () => {
      const users = await left();
      return users.length <= 1 && users;
    },
    { timeoutMs: 10_000, everyMs: 25, what: 'the purge' },
  );
  t.same(now, [late.userId], 'the expired session is gone though its cookie never came back');
  t.equal((await server.json('/v1/me', { headers: { cookie: late.cookie } })).status, 200, 'the live one still works');
  t.equal((await server.json('/v1/me', { headers: { cookie: early.cookie } })).status, 401);

  // A backlog goes a page at a time (pages of 2 here), and only what expired.
  await server.services.db.em().execute(
    `insert into sessions (id, user_id, token_hash, created_at, expires_at, last_seen_at)
     select 'ses_backlog_' || n, ?, 'hash-' || n, ?, ?, ? from generate_series(1, 5) as n`,
    [late.userId, new Date(clock.now() - 7_200_000), new Date(clock.now() - 1), new Date(clock.now() - 7_200_000)],
  );
  t.equal(await purgeExpiredSessions(server.services.db, clock.now(), 2), 5);
  t.same(await left(), [late.userId]);
});

t.test('the cookie is Secure when the base URL is https', async (t) => {
  const server = await startTestServer(t, { env: { BASE_URL: 'https://api.example.com' } });
  const res = await post(server, '/v1/auth/signup', { email: uniqueEmail(), password: 'long enough', name: 'A' });
  t.match(res.headers.get('set-cookie'), /; Secure/);
  const out = await server.json('/v1/auth/logout', { method: 'POST', headers: { cookie: sessionCookieOf(res), origin: 'https://api.example.com' } });
  t.equal(out.status, 204, 'the own origin may write');
  t.match(out.headers.get('set-cookie'), /; Secure/);
});

t.test('cookie-authenticated writes from a foreign Origin are refused; the own origin and ALLOWED_ORIGINS pass', async (t) => {
  const server = await startTestServer(t, { env: { ALLOWED_ORIGINS: 'https://app.example.com, http://localhost:3000' } });
  const user = await signUp(server);
  for (const origin of ['https://evil.example', 'null', 'https://app.example.com.evil.example', 'http://app.example.com']) {
    const res = await server.json('/v1/auth/logout', { method: 'POST', headers: { cookie: user.cookie, origin } });
    t.equal(res.status, 403, origin);
    t.equal(res.body.error.code, 'forbidden');
  }
  t.equal((await rows(server, 'select id from sessions where user_id = ?', [user.userId])).length, 1, 'the session survived the forged logouts');
  const login = await post(server, '/v1/auth/login', { email: user.email, password: user.password }, { ...json, origin: 'https://evil.example' });
  t.equal(login.status, 403, 'login from a foreign page is refused too (login CSRF)');
  const signup = await post(
    server,
    '/v1/auth/signup',
    { email: uniqueEmail(), password: 'long enough', name: 'A' },
    { ...json, origin: 'https://evil.example' },
  );
  t.equal(signup.status, 403);
  for (const origin of [new URL(server.config.baseUrl).origin, 'https://app.example.com', 'http://localhost:3000']) {
    const cookie = await logIn(server, user.email, user.password);
    const res = await server.json('/v1/auth/logout', { method: 'POST', headers: withCookie(cookie, { origin }) });
    t.equal(res.status, 204, origin);
  }
});

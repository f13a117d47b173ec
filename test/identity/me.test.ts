import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, logIn, signUp, uniqueEmail } from '../helpers/identity.ts';
import { call, isError, rows } from './support.ts';

async function userRow(server: TestServer, userId: string) {
  const [row] = await rows(server, 'select id, email, name, password_hash, updated_at from users where id = ?', [userId]);
  return row;
}

function login(server: TestServer, email: string, password: string) {
  return server.json('/v1/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
}

t.test("GET /v1/me is the signed-in user's profile, without secrets", async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server, { name: 'Ada' });
  const me = await call(server, ada.cookie, 'GET', '/v1/me');
  t.equal(me.status, 200);
  t.same(Object.keys(me.body).sort(), ['createdAt', 'email', 'hasPassword', 'id', 'name', 'updatedAt']);
  t.match(me.body, { id: ada.userId, email: ada.email, name: 'Ada', hasPassword: true });
  isError(t, await call(server, undefined, 'GET', '/v1/me'), 401, 'unauthenticated');
  isError(t, await call(server, 'gs_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'GET', '/v1/me'), 401, 'unauthenticated');
});

t.test('PATCH /v1/me changes the name and the e-mail; the new e-mail signs in', async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server, { name: 'Ada' });
  const newEmail = uniqueEmail('renamed');
  const res = await call(server, ada.cookie, 'PATCH', '/v1/me', { name: ' Ada King ', email: newEmail.toUpperCase() });
  t.equal(res.status, 200);
  t.match(res.body, { id: ada.userId, name: 'Ada King', email: newEmail });
  const row = await userRow(server, ada.userId);
  t.equal(row.email, newEmail, 'stored in lower case');
  t.equal(row.name, 'Ada King');
  t.equal((await login(server, newEmail, ada.password)).status, 200, 'the new e-mail signs in');
  isError(t, await login(server, ada.email, ada.password), 401, 'unauthenticated', 'the old one no longer does');

  const nameOnly = await call(server, ada.cookie, 'PATCH', '/v1/me', { name: 'Countess' });
  t.match(nameOnly.body, { name: 'Countess', email: newEmail });
});

t.test('PATCH /v1/me refuses a taken e-mail with 409 and bad input with 400, changing nothing', async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server, { name: 'Ada' });
  const bob = await signUp(server, { name: 'Bob' });
  const before = await userRow(server, ada.userId);

  isError(t, await call(server, ada.cookie, 'PATCH', '/v1/me', { email: bob.email.toUpperCase() }), 409, 'conflict', /e-mail/);
  isError(t, await call(server, ada.cookie, 'PATCH', '/v1/me', { name: 'Taken', email: bob.email }), 409, 'conflict');
  const bad: Array<[string, unknown, RegExp]> = [
    ['malformed e-mail', { email: 'ada-at-example.com' }, /body\.email/],
    ['e-mail with spaces', { email: 'ada lovelace@example.com' }, /body\.email/],
    ['over-long e-mail', { email: `${'a'.repeat(250)}@example.com` }, /body\.email/],
    ['e-mail as a number', { email: 5 }, /body\.email/],
    ['over-long name', { name: 'n'.repeat(101) }, /body\.name/],
    ['empty name', { name: '' }, /body\.name/],
    ['blank name', { name: '    ' }, /body\.name/],
    ['name as an object', { name: { first: 'Ada' } }, /body\.name/],
    ['nothing to change', {}, /body/],
    ['a password hash', { passwordHash: 'scrypt$1$1$1$AAAA$AAAA' }, /passwordHash/],
    ['an id', { id: 'usr_other' }, /id/],
  ];
  for (const [what, body, message] of bad) {
    const response = await call(server, ada.cookie, 'PATCH', '/v1/me', body);
    await t.test(what, async (t) => isError(t, response, 400, 'validation_error', message));
  }
  t.same(await userRow(server, ada.userId), before, 'nothing changed');
  t.equal((await userRow(server, bob.userId)).email, bob.email, 'nor for the other user');
});

t.test('change-password: the current password is required; other sessions end, this one stays', async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server);
  const otherSession = await logIn(server, ada.email, ada.password);
  const bob = await signUp(server);
  const before = await userRow(server, ada.userId);

  isError(
    t,
    await call(server, ada.cookie, 'POST', '/v1/me/change-password', { currentPassword: 'wrong password', newPassword: 'brand new password' }),
    403,
    'forbidden',
    /current password/,
  );
  isError(
    t,
    await call(server, ada.cookie, 'POST', '/v1/me/change-password', { currentPassword: ada.password, newPassword: 'short' }),
    400,
    'validation_error',
    /newPassword/,
  );
  isError(
    t,
    await call(server, ada.cookie, 'POST', '/v1/me/change-password', { newPassword: 'brand new password' }),
    400,
    'validation_error',
    /currentPassword/,
  );
  isError(
    t,
    await call(server, ada.cookie, 'POST', '/v1/me/change-password', { currentPassword: ada.password, newPassword: 12345678 }),
    400,
    'validation_error',
    /newPassword/,
  );
  t.same(await userRow(server, ada.userId), before, 'refusals change nothing');
  t.equal((await call(server, otherSession, 'GET', '/v1/me')).status, 200, 'and end no session');

  const changed = await call(server, ada.cookie, 'POST', '/v1/me/change-password', { currentPassword: ada.password, newPassword: 'brand new password' });
  t.equal(changed.status, 204);
  t.not((await userRow(server, ada.userId)).password_hash, before.password_hash);
  t.equal((await call(server, ada.cookie, 'GET', '/v1/me')).status, 200, 'the current session stays');
  isError(t, await call(server, otherSession, 'GET', '/v1/me'), 401, 'unauthenticated', 'the other session ended');
  t.equal((await rows(server, 'select 1 from sessions where user_id = ?', [ada.userId])).length, 1, 'one session left');
  t.equal((await call(server, bob.cookie, 'GET', '/v1/me')).status, 200, "another user's session is untouched");
  isError(t, await login(server, ada.email, ada.password), 401, 'unauthenticated', 'the old password no longer signs in');
  t.equal((await login(server, ada.email, 'brand new password')).status, 200, 'the new one does');
});

t.test('linked accounts: listed; the last way to sign in cannot be unlinked; unlinking password removes it', async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server);
  const bob = await signUp(server);
  const list = await call(server, ada.cookie, 'GET', '/v1/me/accounts');
  t.equal(list.status, 200);
  t.match(list.body, { data: [{ provider: 'password', providerAccountId: ada.userId }], nextCursor: null });

  const before = await rows(server, 'select provider from linked_accounts where user_id = ?', [ada.userId]);
  isError(t, await call(server, ada.cookie, 'DELETE', '/v1/me/accounts/password'), 409, 'conflict', /last way to sign in/);
  isError(t, await call(server, ada.cookie, 'DELETE', '/v1/me/accounts/github'), 404, 'not_found');
  t.same(await rows(server, 'select provider from linked_accounts where user_id = ?', [ada.userId]), before);
  t.equal((await login(server, ada.email, ada.password)).status, 200, 'the password still works');

  // No social sign-in flow exists yet: link one the way it would, in the table.
  await rows(server, 'insert into linked_accounts (user_id, provider, provider_account_id, created_at) values (?, ?, ?, now())', [
    ada.userId,
    'github',
    'gh-1234',
  ]);
  await rows(server, 'insert into linked_accounts (user_id, provider, provider_account_id, created_at) values (?, ?, ?, now())', [
    bob.userId,
    'github',
    'gh-5678',
  ]);
  t.same((await call(server, ada.cookie, 'GET', '/v1/me/accounts')).body.data.map((a: any) => a.provider).sort(), ['github', 'password']);

  t.equal((await call(server, ada.cookie, 'DELETE', '/v1/me/accounts/password')).status, 204);
  t.equal((await userRow(server, ada.userId)).password_hash, null, 'the password is gone');
  t.same(
    (await call(server, ada.cookie, 'GET', '/v1/me/accounts')).body.data.map((a: any) => a.provider),
    ['github'],
  );
  t.equal((await call(server, ada.cookie, 'GET', '/v1/me')).body.hasPassword, false);
  isError(t, await login(server, ada.email, ada.password), 401, 'unauthenticated', 'the password no longer signs in');
  isError(
    t,
    await call(server, ada.cookie, 'POST', '/v1/me/change-password', { currentPassword: ada.password, newPassword: 'another password' }),
    409,
    'conflict',
    /no password/,
  );

  isError(t, await call(server, ada.cookie, 'DELETE', '/v1/me/accounts/github'), 409, 'conflict', /last way/);
  t.same(await rows(server, 'select provider from linked_accounts where user_id = ?', [ada.userId]), [{ provider: 'github' }], 'still linked');
  t.same(
    await rows(server, 'select provider from linked_accounts where user_id = ? order by provider', [bob.userId]),
    [{ provider: 'github' }, { provider: 'password' }],
    "another user's accounts are untouched",
  );
});

t.test('API keys have no user: every account endpoint answers 403 and changes nothing', async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server);
  const key = await createKey(server, ada.cookie, ada.workspaceId, ['all']);
  const before = await userRow(server, ada.userId);
  const attempts: Array<['GET' | 'POST' | 'PATCH' | 'DELETE', string, unknown?]> = [
    ['GET', '/v1/me'],
    ['PATCH', '/v1/me', { name: 'By key' }],
    ['POST', '/v1/me/change-password', { currentPassword: ada.password, newPassword: 'by key password' }],
    ['POST', '/v1/me/export-request'],
    ['GET', '/v1/me/accounts'],
    ['DELETE', '/v1/me/accounts/password'],
    ['DELETE', '/v1/me'],
    ['GET', '/v1/me/exports/exp_x/download'],
  ];
  for (const [method, path, body] of attempts) isError(t, await call(server, key.key, method, path, body), 403, 'forbidden', `${method} ${path}`);
  t.same(await userRow(server, ada.userId), before);
  t.equal((await rows(server, 'select 1 from export_requests')).length, 0);
});

t.test('races: two unlinks of the last two sign-in methods leave one', async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server);
  await rows(server, 'insert into linked_accounts (user_id, provider, provider_account_id, created_at) values (?, ?, ?, now())', [
    ada.userId,
    'github',
    'gh-race',
  ]);
  const [a, b] = await Promise.all([
    call(server, ada.cookie, 'DELETE', '/v1/me/accounts/password'),
    call(server, ada.cookie, 'DELETE', '/v1/me/accounts/github'),
  ]);
  t.same([a.status, b.status].sort(), [204, 409]);
  const left = await rows(server, 'select provider from linked_accounts where user_id = ?', [ada.userId]);
  const [user] = await rows(server, 'select password_hash from users where id = ?', [ada.userId]);
  t.equal(left.length + (user.password_hash !== null && !left.some((r) => r.provider === 'password') ? 1 : 0), 1, 'exactly one way to sign in remains');
});

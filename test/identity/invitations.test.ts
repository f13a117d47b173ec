import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { sha256Hex } from '../../http/auth/tokens.ts';
import { startTestServer } from '../helpers/server.ts';
import { signUp, uniqueEmail } from '../helpers/identity.ts';
import { addMember, call, isError, rows, workspaceState } from './support.ts';

const DAY = 24 * 3_600_000;

t.test('an invitation is made once with its token, listed while pending, and accepted by the invited e-mail', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const guestEmail = uniqueEmail('guest');
  const id = (await call(server, owner.cookie, 'POST', '/v1/workspaces', { name: 'Studio' })).body.id;

  const made = await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/invitations`, { email: `  ${guestEmail.toUpperCase()}`.trim() });
  t.equal(made.status, 201);
  t.match(made.body, {
    id: /^inv_[0-9a-z]{26}$/,
    workspaceId: id,
    email: guestEmail,
    role: 'member',
    status: 'pending',
    invitedBy: owner.userId,
    acceptedAt: null,
  });
  t.match(made.body.token, /^gsi_[A-Za-z0-9_-]{43}$/);
  t.equal(Date.parse(made.body.expiresAt) - Date.parse(made.body.createdAt), 7 * DAY, 'valid for 7 days');
  const [stored] = await rows(server, 'select * from invitations where id = ?', [made.body.id]);
  t.equal(stored.token_hash, sha256Hex(made.body.token), "only the token's hash is stored");
  t.notOk(JSON.stringify(stored).includes(made.body.token), 'never the token itself');

  const listed = await call(server, owner.cookie, 'GET', `/v1/workspaces/${id}/invitations`);
  t.equal(listed.status, 200);
  const { token, ...withoutToken } = made.body;
  t.same(listed.body, { data: [withoutToken], nextCursor: null }, 'listed, without the token');

  const guest = await signUp(server, { email: guestEmail });
  const accepted = await call(server, guest.cookie, 'POST', '/v1/invitations/accept', { token });
  t.equal(accepted.status, 200);
  t.match(accepted.body, { id, name: 'Studio', role: 'member' });
  t.same(await rows(server, 'select role from workspace_members where workspace_id = ? and user_id = ?', [id, guest.userId]), [{ role: 'member' }]);
  const [after] = await rows(server, 'select status, accepted_by, accepted_at from invitations where id = ?', [made.body.id]);
  t.equal(after.status, 'accepted');
  t.equal(after.accepted_by, guest.userId);
  t.ok(after.accepted_at);
  t.same((await call(server, owner.cookie, 'GET', `/v1/workspaces/${id}/invitations`)).body.data, [], 'no longer pending');
  t.equal((await call(server, guest.cookie, 'GET', `/v1/workspaces/${id}`)).body.role, 'member');

  const state = await workspaceState(server, id);
  isError(t, await call(server, guest.cookie, 'POST', '/v1/invitations/accept', { token }), 409, 'conflict', /already been used/);
  const third = await signUp(server);
  isError(t, await call(server, third.cookie, 'POST', '/v1/invitations/accept', { token }), 409, 'conflict', /already been used/);
  t.same(await workspaceState(server, id), state, 'a used invitation changes nothing');
});

t.test('admins invite admins; members read the pending list but cannot invite or cancel', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const admin = await signUp(server);
  const member = await signUp(server);
  const id = (await call(server, owner.cookie, 'POST', '/v1/workspaces', { name: 'Roles' })).body.id;
  await addMember(server, owner.cookie, id, admin, 'admin');
  await addMember(server, owner.cookie, id, member, 'member');

  const byAdmin = await call(server, admin.cookie, 'POST', `/v1/workspaces/${id}/invitations`, { email: uniqueEmail('second-admin'), role: 'admin' });
  t.equal(byAdmin.status, 201);
  t.equal(byAdmin.body.role, 'admin');
  t.equal(byAdmin.body.invitedBy, admin.userId);
  t.equal((await call(server, member.cookie, 'GET', `/v1/workspaces/${id}/invitations`)).body.data.length, 1, 'members can read');

  const before = await workspaceState(server, id);
  isError(
    t,
    await call(server, member.cookie, 'POST', `/v1/workspaces/${id}/invitations`, { email: uniqueEmail('friend') }),
    403,
    'forbidden',
    /owner or admin/,
  );
  isError(t, await call(server, member.cookie, 'DELETE', `/v1/workspaces/${id}/invitations/${byAdmin.body.id}`), 403, 'forbidden');
  t.same(await workspaceState(server, id), before, 'nothing changed');

  const invitee = await signUp(server, { email: byAdmin.body.email });
  t.equal((await call(server, invitee.cookie, 'POST', '/v1/invitations/accept', { token: byAdmin.body.token })).body.role, 'admin');
});

t.test('cancelled invitations cannot be accepted, nor cancelled twice', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const guest = await signUp(server);
  const made = await call(server, owner.cookie, 'POST', `/v1/workspaces/${owner.workspaceId}/invitations`, { email: guest.email, role: 'admin' });

  const cancelled = await call(server, owner.cookie, 'DELETE', `/v1/workspaces/${owner.workspaceId}/invitations/${made.body.id}`);
  t.equal(cancelled.status, 204);
  t.same(await rows(server, 'select status from invitations where id = ?', [made.body.id]), [{ status: 'cancelled' }]);
  t.same((await call(server, owner.cookie, 'GET', `/v1/workspaces/${owner.workspaceId}/invitations`)).body.data, [], 'not listed');

  const before = await workspaceState(server, owner.workspaceId);
  isError(t, await call(server, guest.cookie, 'POST', '/v1/invitations/accept', { token: made.body.token }), 409, 'conflict', /cancelled/);
  isError(t, await call(server, owner.cookie, 'DELETE', `/v1/workspaces/${owner.workspaceId}/invitations/${made.body.id}`), 409, 'conflict', /cancelled/);
  isError(t, await call(server, owner.cookie, 'DELETE', `/v1/workspaces/${owner.workspaceId}/invitations/inv_unknown`), 404, 'not_found');
  t.same(await workspaceState(server, owner.workspaceId), before, 'nothing changed');

  const again = await call(server, owner.cookie, 'POST', `/v1/workspaces/${owner.workspaceId}/invitations`, { email: guest.email });
  t.equal(again.status, 201, 'the e-mail may be invited again');
  t.equal((await call(server, guest.cookie, 'POST', '/v1/invitations/accept', { token: again.body.token })).status, 200);
  isError(t, await call(server, owner.cookie, 'DELETE', `/v1/workspaces/${owner.workspaceId}/invitations/${again.body.id}`), 409, 'conflict', /accepted/);
});

t.test('accepting with an account of another e-mail is 403, and an unknown token 404; nothing changes', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const intended = uniqueEmail('intended');
  const interloper = await signUp(server);
  const made = await call(server, owner.cookie, 'POST', `/v1/workspaces/${owner.workspaceId}/invitations`, { email: intended, role: 'admin' });
  const before = await workspaceState(server, owner.workspaceId);

  isError(t, await call(server, interloper.cookie, 'POST', '/v1/invitations/accept', { token: made.body.token }), 403, 'forbidden', /another e-mail/);
  isError(t, await call(server, interloper.cookie, 'POST', '/v1/invitations/accept', { token: `gsi_${'A'.repeat(43)}` }), 404, 'not_found');
  isError(t, await call(server, interloper.cookie, 'POST', '/v1/invitations/accept', { token: 'nonsense' }), 404, 'not_found');
  isError(
    t,
    await call(server, interloper.cookie, 'POST', '/v1/invitations/accept', { token: sha256Hex(made.body.token) }),
    404,
    'not_found',
    'the stored hash is not a token',
  );
  isError(t, await call(server, interloper.cookie, 'POST', '/v1/invitations/accept', {}), 400, 'validation_error', /token/);
  isError(t, await call(server, interloper.cookie, 'POST', '/v1/invitations/accept', { token: 12 }), 400, 'validation_error', /token/);
  isError(t, await call(server, undefined, 'POST', '/v1/invitations/accept', { token: made.body.token }), 401, 'unauthenticated');
  t.same(await workspaceState(server, owner.workspaceId), before, 'still pending, no new member');

  const rightPerson = await signUp(server, { email: intended });
  t.equal((await call(server, rightPerson.cookie, 'POST', '/v1/invitations/accept', { token: made.body.token })).status, 200, 'the invited e-mail can');
});

t.test('duplicates and members are refused with 409; bad e-mails and roles with 400', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const member = await signUp(server);
  const ws = owner.workspaceId;
  await addMember(server, owner.cookie, ws, member);
  const email = uniqueEmail('dup');
  t.equal((await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email })).status, 201);
  const before = await workspaceState(server, ws);

  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email }), 409, 'conflict', /pending invitation/);
  isError(
    t,
    await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email: email.toUpperCase(), role: 'admin' }),
    409,
    'conflict',
    /pending invitation/,
  );
  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email: member.email }), 409, 'conflict', /already a member/);
  isError(
    t,
    await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email: owner.email.toUpperCase() }),
    409,
    'conflict',
    /already a member/,
  );

  const bad: Array<[string, unknown, RegExp]> = [
    ['no @', { email: 'not-an-email' }, /body\.email/],
    ['no domain', { email: 'someone@' }, /body\.email/],
    ['no local part', { email: '@example.com' }, /body\.email/],
    ['a space', { email: 'some one@example.com' }, /body\.email/],
    ['over-long', { email: `${'a'.repeat(64)}@${'b'.repeat(190)}.example.com` }, /body\.email/],
    ['a number', { email: 12345 }, /body\.email/],
    ['no e-mail', { role: 'member' }, /email/],
    ['role owner', { email: uniqueEmail(), role: 'owner' }, /role/],
    ['unknown role', { email: uniqueEmail(), role: 'superuser' }, /role/],
    ['unknown field', { email: uniqueEmail(), expiresAt: '2099-01-01T00:00:00Z' }, /expiresAt/],
  ];
  for (const [what, body, message] of bad) {
    const response = await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, body);
    await t.test(what, async (t) => isError(t, response, 400, 'validation_error', message));
  }
  t.same(await workspaceState(server, ws), before, 'no invitation made');
});

t.test('an invitation expires after 7 days: 409 on accept, gone from the list, and the e-mail can be invited again', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 2, 1));
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server);
  const early = await signUp(server);
  const late = await signUp(server);
  const ws = owner.workspaceId;
  const first = await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email: early.email });
  const second = await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email: late.email });
  t.equal(second.body.expiresAt, new Date(Date.UTC(2026, 2, 8)).toISOString());

  clock.advance(7 * DAY - 1);
  t.equal((await call(server, early.cookie, 'POST', '/v1/invitations/accept', { token: first.body.token })).status, 200, 'accepted the moment before expiry');

  clock.advance(1);
  const before = await workspaceState(server, ws);
  isError(t, await call(server, late.cookie, 'POST', '/v1/invitations/accept', { token: second.body.token }), 409, 'conflict', /expired/);
  t.same(await workspaceState(server, ws), before, 'no member added');
  t.same((await call(server, owner.cookie, 'GET', `/v1/workspaces/${ws}/invitations`)).body.data, [], 'an expired invitation is not listed');

  const renewed = await call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email: late.email });
  t.equal(renewed.status, 201, 'the expired one does not block a new one');
  t.same(await rows(server, 'select status from invitations where id = ?', [second.body.id]), [{ status: 'cancelled' }], 'it is retired');
  isError(t, await call(server, late.cookie, 'POST', '/v1/invitations/accept', { token: second.body.token }), 409, 'conflict', 'the old token stays dead');
  t.equal((await call(server, late.cookie, 'POST', '/v1/invitations/accept', { token: renewed.body.token })).status, 200);
});

t.test('the pending list pages newest first', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const made: string[] = [];
  for (let i = 0; i < 5; i++)
    made.push((await call(server, owner.cookie, 'POST', `/v1/workspaces/${owner.workspaceId}/invitations`, { email: uniqueEmail(`page${i}`) })).body.id);
  const first = await call(server, owner.cookie, 'GET', `/v1/workspaces/${owner.workspaceId}/invitations?limit=3`);
  const second = await call(server, owner.cookie, 'GET', `/v1/workspaces/${owner.workspaceId}/invitations?limit=3&cursor=${first.body.nextCursor}`);
  t.same(
    [...first.body.data, ...second.body.data].map((i: any) => i.id),
    made.reverse(),
  );
  t.equal(second.body.nextCursor, null);
});

t.test('races: one invitation per e-mail, one acceptance per token', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const guest = await signUp(server);
  const ws = owner.workspaceId;

  const invites = await Promise.all(
    Array.from({ length: 4 }, () => call(server, owner.cookie, 'POST', `/v1/workspaces/${ws}/invitations`, { email: guest.email })),
  );
  t.same(invites.map((r) => r.status).sort(), [201, 409, 409, 409], 'concurrent invitations of one e-mail: one made, the rest 409');
  t.equal((await rows(server, 'select 1 from invitations where workspace_id = ? and status = ?', [ws, 'pending'])).length, 1);

  const token = invites.find((r) => r.status === 201)!.body.token;
  const accepts = await Promise.all(Array.from({ length: 4 }, () => call(server, guest.cookie, 'POST', '/v1/invitations/accept', { token })));
  t.same(accepts.map((r) => r.status).sort(), [200, 409, 409, 409], 'concurrent acceptances: one joins, the rest 409');
  t.same(await rows(server, 'select role from workspace_members where workspace_id = ? and user_id = ?', [ws, guest.userId]), [{ role: 'member' }]);
});

import t from 'tap';
import { sharedTestServer, type TestServer } from '../helpers/server.ts';
import { signUp, type SignedUp } from '../helpers/identity.ts';
import { addMember, call, isError, rows, workspaceState } from './support.ts';

/** A workspace with an owner, an admin and two members. */
async function team(server: TestServer) {
  const owner = await signUp(server, { name: 'Olive Owner' });
  const admin = await signUp(server, { name: 'Adam Admin' });
  const member = await signUp(server, { name: 'Mia Member' });
  const other = await signUp(server, { name: 'Otto Member' });
  const id = (await call(server, owner.cookie, 'POST', '/v1/workspaces', { name: 'Team' })).body.id as string;
  await addMember(server, owner.cookie, id, admin, 'admin');
  await addMember(server, owner.cookie, id, member, 'member');
  await addMember(server, owner.cookie, id, other, 'member');
  return { owner, admin, member, other, id };
}

async function roleOf(server: TestServer, workspaceId: string, user: SignedUp): Promise<string | undefined> {
  const [row] = await rows(server, 'select role from workspace_members where workspace_id = ? and user_id = ?', [workspaceId, user.userId]);
  return row?.role;
}

t.test('any member lists the members with their roles, newest first, page by page', async (t) => {
  const server = await sharedTestServer();
  const { owner, admin, member, other, id } = await team(server);
  const all: any[] = [];
  let cursor: string | null = null;
  do {
    const page: any = await call(server, member.cookie, 'GET', `/v1/workspaces/${id}/members?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(page.status, 200);
    all.push(...page.body.data);
    cursor = page.body.nextCursor;
  } while (cursor);
  t.same(
    all.map((m) => [m.userId, m.role, m.name]),
    [
      [other.userId, 'member', 'Otto Member'],
      [member.userId, 'member', 'Mia Member'],
      [admin.userId, 'admin', 'Adam Admin'],
      [owner.userId, 'owner', 'Olive Owner'],
    ],
  );
  t.equal(all[0].email, other.email);
  t.match(all[0].joinedAt, /^\d{4}-\d\d-\d\dT/);
  isError(
    t,
    await call(server, member.cookie, 'GET', `/v1/workspaces/${id}/members?cursor=${Buffer.from('["x"]').toString('base64url')}`),
    400,
    'validation_error',
    /cursor/,
  );
});

t.test("owners and admins change roles; members cannot; the owner's role changes only by transfer", async (t) => {
  const server = await sharedTestServer();
  const { owner, admin, member, other, id } = await team(server);

  const promoted = await call(server, owner.cookie, 'PATCH', `/v1/workspaces/${id}/members/${member.userId}`, { role: 'admin' });
  t.equal(promoted.status, 200);
  t.match(promoted.body, { userId: member.userId, role: 'admin', email: member.email });
  t.equal(await roleOf(server, id, member), 'admin');

  const demoted = await call(server, admin.cookie, 'PATCH', `/v1/workspaces/${id}/members/${member.userId}`, { role: 'member' });
  t.equal(demoted.status, 200);
  t.equal(await roleOf(server, id, member), 'member', 'an admin may demote an admin');

  const before = await workspaceState(server, id);
  isError(t, await call(server, member.cookie, 'PATCH', `/v1/workspaces/${id}/members/${other.userId}`, { role: 'admin' }), 403, 'forbidden', /owner or admin/);
  isError(
    t,
    await call(server, member.cookie, 'PATCH', `/v1/workspaces/${id}/members/${member.userId}`, { role: 'admin' }),
    403,
    'forbidden',
    'not even themselves',
  );
  isError(t, await call(server, admin.cookie, 'PATCH', `/v1/workspaces/${id}/members/${owner.userId}`, { role: 'member' }), 403, 'forbidden', /admin cannot/);
  isError(t, await call(server, owner.cookie, 'PATCH', `/v1/workspaces/${id}/members/${owner.userId}`, { role: 'admin' }), 409, 'conflict', /transfer/);
  isError(t, await call(server, owner.cookie, 'PATCH', `/v1/workspaces/${id}/members/${member.userId}`, { role: 'owner' }), 400, 'validation_error', /role/);
  isError(
    t,
    await call(server, owner.cookie, 'PATCH', `/v1/workspaces/${id}/members/${member.userId}`, { role: 'boss' }),
    400,
    'validation_error',
    /body.role: must be one of "admin", "member"/,
  );
  isError(t, await call(server, owner.cookie, 'PATCH', `/v1/workspaces/${id}/members/${member.userId}`, { role: 1 }), 400, 'validation_error', /role/);
  isError(t, await call(server, owner.cookie, 'PATCH', `/v1/workspaces/${id}/members/${member.userId}`, {}), 400, 'validation_error', /role/);
  const stranger = await signUp(server);
  isError(t, await call(server, owner.cookie, 'PATCH', `/v1/workspaces/${id}/members/${stranger.userId}`, { role: 'admin' }), 404, 'not_found');
  t.same(await workspaceState(server, id), before, 'no refused change happened');
});

t.test('removing members: by owners and admins, or oneself; never the owner', async (t) => {
  const server = await sharedTestServer();
  const { owner, admin, member, other, id } = await team(server);

  const before = await workspaceState(server, id);
  isError(t, await call(server, member.cookie, 'DELETE', `/v1/workspaces/${id}/members/${other.userId}`), 403, 'forbidden');
  isError(t, await call(server, admin.cookie, 'DELETE', `/v1/workspaces/${id}/members/${owner.userId}`), 403, 'forbidden', /admin cannot remove the owner/);
  isError(t, await call(server, owner.cookie, 'DELETE', `/v1/workspaces/${id}/members/${owner.userId}`), 409, 'conflict', /transfer/);
  t.same(await workspaceState(server, id), before, 'nothing changed');

  t.equal((await call(server, admin.cookie, 'DELETE', `/v1/workspaces/${id}/members/${other.userId}`)).status, 204);
  t.equal(await roleOf(server, id, other), undefined, 'removed');
  isError(t, await call(server, other.cookie, 'GET', `/v1/workspaces/${id}`), 404, 'not_found', 'a removed member sees nothing');
  t.notOk((await call(server, other.cookie, 'GET', '/v1/workspaces')).body.data.some((w: any) => w.id === id));
  isError(t, await call(server, admin.cookie, 'DELETE', `/v1/workspaces/${id}/members/${other.userId}`), 404, 'not_found', 'not twice');

  t.equal((await call(server, member.cookie, 'DELETE', `/v1/workspaces/${id}/members/${member.userId}`)).status, 204, 'a member may remove themselves');
  t.equal(await roleOf(server, id, member), undefined);
  t.equal(await roleOf(server, id, owner), 'owner', 'the owner stays');
});

t.test('ownership moves only to an existing member, and only by the owner', async (t) => {
  const server = await sharedTestServer();
  const { owner, admin, member, id } = await team(server);
  const stranger = await signUp(server);

  const before = await workspaceState(server, id);
  isError(t, await call(server, admin.cookie, 'POST', `/v1/workspaces/${id}/transfer`, { userId: admin.userId }), 403, 'forbidden', /owner/);
  isError(t, await call(server, member.cookie, 'POST', `/v1/workspaces/${id}/transfer`, { userId: member.userId }), 403, 'forbidden');
  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/transfer`, { userId: stranger.userId }), 409, 'conflict', /not a member/);
  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/transfer`, { userId: 'usr_nobody' }), 409, 'conflict', /not a member/);
  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/transfer`, { userId: owner.userId }), 409, 'conflict', /already own/);
  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/transfer`, {}), 400, 'validation_error', /userId/);
  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/transfer`, { userId: 7 }), 400, 'validation_error', /userId/);
  t.same(await workspaceState(server, id), before, 'refusals change nothing');

  const moved = await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/transfer`, { userId: member.userId });
  t.equal(moved.status, 200);
  t.match(moved.body, { id, role: 'admin' });
  t.same(
    await rows(server, 'select user_id, role from workspace_members where workspace_id = ? and role = ?', [id, 'owner']),
    [{ user_id: member.userId, role: 'owner' }],
    'exactly one owner, the new one',
  );
  t.equal(await roleOf(server, id, owner), 'admin', 'the old owner is now admin');
  t.equal((await call(server, member.cookie, 'GET', `/v1/workspaces/${id}`)).body.role, 'owner');

  isError(t, await call(server, owner.cookie, 'DELETE', `/v1/workspaces/${id}`), 403, 'forbidden', 'the old owner can no longer delete');
  t.equal((await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/leave`)).status, 204, 'and may now leave');
  t.equal((await call(server, member.cookie, 'DELETE', `/v1/workspaces/${id}`)).status, 204, 'the new owner can delete');
});

t.test('leaving: anyone but the owner', async (t) => {
  const server = await sharedTestServer();
  const { owner, admin, id } = await team(server);
  const before = await workspaceState(server, id);
  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/leave`), 409, 'conflict', /transfer/);
  isError(t, await call(server, owner.cookie, 'POST', `/v1/workspaces/${owner.workspaceId}/leave`), 409, 'conflict', 'not even a personal workspace');
  t.same(await workspaceState(server, id), before);

  const left = await call(server, admin.cookie, 'POST', `/v1/workspaces/${id}/leave`);
  t.equal(left.status, 204);
  t.equal(await roleOf(server, id, admin), undefined);
  isError(t, await call(server, admin.cookie, 'POST', `/v1/workspaces/${id}/leave`), 404, 'not_found', 'no second time');
  isError(t, await call(server, admin.cookie, 'GET', `/v1/workspaces/${id}/members`), 404, 'not_found');
});

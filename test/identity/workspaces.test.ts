import t from 'tap';
import { sharedTestServer, startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { addMember, call, generation, isError, rows, storedAsset, workspaceState } from './support.ts';

t.test('create, list, read and rename a workspace', async (t) => {
  const server = await sharedTestServer();
  const ada = await signUp(server, { name: 'Ada' });

  const created = await call(server, ada.cookie, 'POST', '/v1/workspaces', { name: '  Research  ' });
  t.equal(created.status, 201);
  t.match(created.body, { id: /^ws_[0-9a-z]{26}$/, name: 'Research', plan: 'free', personal: false, role: 'owner' });
  t.equal(created.body.createdAt, created.body.updatedAt);
  const id = created.body.id;
  t.same(
    await rows(server, 'select user_id, role from workspace_members where workspace_id = ?', [id]),
    [{ user_id: ada.userId, role: 'owner' }],
    'the creator is its one owner',
  );

  const list = await call(server, ada.cookie, 'GET', '/v1/workspaces');
  t.equal(list.status, 200);
  t.same(
    list.body.data.map((w: any) => [w.id, w.role, w.personal]),
    [
      [id, 'owner', false],
      [ada.workspaceId, 'owner', true],
    ],
    "newest first, with the caller's role",
  );
  t.equal(list.body.nextCursor, null);

  const detail = await call(server, ada.cookie, 'GET', `/v1/workspaces/${id}`);
  t.equal(detail.status, 200);
  t.same(detail.body, created.body);

  const renamed = await call(server, ada.cookie, 'PATCH', `/v1/workspaces/${id}`, { name: 'Lab' });
  t.equal(renamed.status, 200);
  t.equal(renamed.body.name, 'Lab');
  t.equal(renamed.body.role, 'owner');
  t.ok(renamed.body.updatedAt >= created.body.updatedAt);
  const [row] = await rows(server, 'select name from workspaces where id = ?', [id]);
  t.equal(row.name, 'Lab', 'stored');
});

t.test("the list pages with a cursor, newest first, and shows only the caller's workspaces", async (t) => {
  const server = await sharedTestServer();
  const ada = await signUp(server);
  const bob = await signUp(server);
  await call(server, bob.cookie, 'POST', '/v1/workspaces', { name: "Not Ada's" });
  const made = [ada.workspaceId];
  for (let i = 0; i < 4; i++) made.push((await call(server, ada.cookie, 'POST', '/v1/workspaces', { name: `W${i}` })).body.id);

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: any = await call(server, ada.cookie, 'GET', `/v1/workspaces?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    t.equal(page.status, 200);
    t.ok(page.body.data.length <= 2);
    seen.push(...page.body.data.map((w: any) => w.id));
    cursor = page.body.nextCursor;
    pages++;
  } while (cursor && pages < 10);
  t.equal(pages, 3);
  t.same(seen, [...made].reverse(), 'every workspace once, newest first, none of another user');

  isError(t, await call(server, ada.cookie, 'GET', '/v1/workspaces?cursor=not-a-cursor'), 400, 'validation_error', /cursor/);
  isError(t, await call(server, ada.cookie, 'GET', '/v1/workspaces?limit=0'), 400, 'validation_error', /limit/);
  isError(t, await call(server, ada.cookie, 'GET', '/v1/workspaces?limit=101'), 400, 'validation_error', /limit/);
  isError(t, await call(server, ada.cookie, 'GET', '/v1/workspaces?sort=name'), 400, 'validation_error', /sort/);
  isError(t, await call(server, undefined, 'GET', '/v1/workspaces'), 401, 'unauthenticated');
});

t.test('bad input is refused with the envelope and changes nothing', async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server);
  const id = (await call(server, ada.cookie, 'POST', '/v1/workspaces', { name: 'Kept' })).body.id;
  const before = await rows(server, 'select id, name, plan, updated_at from workspaces order by id');

  const creates: Array<[string, unknown, RegExp]> = [
    ['empty name', { name: '' }, /body\.name/],
    ['blank name', { name: '   ' }, /body\.name/],
    ['over-long name', { name: 'x'.repeat(101) }, /body\.name/],
    ['name of the wrong type', { name: 42 }, /body\.name/],
    ['missing name', {}, /name/],
    ['unknown field', { name: 'Paid', plan: 'team' }, /plan/],
  ];
  for (const [what, body, message] of creates) {
    t.test(`create: ${what}`, async (t) => isError(t, await call(server, ada.cookie, 'POST', '/v1/workspaces', body), 400, 'validation_error', message));
  }
  const patches: Array<[string, unknown, RegExp]> = [
    ['no field', {}, /body/],
    ['over-long name', { name: 'y'.repeat(101) }, /body\.name/],
    ['a plan change', { plan: 'team' }, /plan/],
    ['personal flag', { personal: true }, /personal/],
    ['an array', [], /body/],
  ];
  for (const [what, body, message] of patches) {
    t.test(`update: ${what}`, async (t) => isError(t, await call(server, ada.cookie, 'PATCH', `/v1/workspaces/${id}`, body), 400, 'validation_error', message));
  }
  isError(t, await call(server, ada.cookie, 'POST', '/v1/workspaces'), 400, 'validation_error', /body/);
  isError(t, await call(server, ada.cookie, 'GET', `/v1/workspaces/${'w'.repeat(65)}`), 400, 'validation_error', /workspaceId/);
  t.same(await rows(server, 'select id, name, plan, updated_at from workspaces order by id'), before, 'no workspace made or changed');
});

t.test('roles: members read, owners and admins rename, only the owner deletes', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const admin = await signUp(server);
  const member = await signUp(server);
  const id = (await call(server, owner.cookie, 'POST', '/v1/workspaces', { name: 'Shared' })).body.id;
  await addMember(server, owner.cookie, id, admin, 'admin');
  await addMember(server, owner.cookie, id, member, 'member');

  const read = await call(server, member.cookie, 'GET', `/v1/workspaces/${id}`);
  t.equal(read.status, 200);
  t.equal(read.body.role, 'member');
  t.same(
    (await call(server, member.cookie, 'GET', '/v1/workspaces')).body.data.map((w: any) => [w.id, w.role]),
    [
      [id, 'member'],
      [member.workspaceId, 'owner'],
    ],
  );

  const before = await workspaceState(server, id);
  isError(t, await call(server, member.cookie, 'PATCH', `/v1/workspaces/${id}`, { name: 'Mine now' }), 403, 'forbidden', /owner or admin/);
  isError(t, await call(server, member.cookie, 'DELETE', `/v1/workspaces/${id}`), 403, 'forbidden', /owner/);
  isError(t, await call(server, admin.cookie, 'DELETE', `/v1/workspaces/${id}`), 403, 'forbidden', /owner/);
  t.same(await workspaceState(server, id), before, 'refusals change nothing');

  const renamed = await call(server, admin.cookie, 'PATCH', `/v1/workspaces/${id}`, { name: 'Renamed by admin' });
  t.equal(renamed.status, 200);
  t.equal(renamed.body.role, 'admin');

  const invitation = await call(server, owner.cookie, 'POST', `/v1/workspaces/${id}/invitations`, { email: 'later@example.com' });
  t.equal(invitation.status, 201);
  const deleted = await call(server, owner.cookie, 'DELETE', `/v1/workspaces/${id}`);
  t.equal(deleted.status, 204);
  t.equal(deleted.body, undefined);
  t.same(await workspaceState(server, id), { workspace: [], members: [], invitations: [], keys: [] }, 'the workspace, its members and invitations are gone');
  for (const user of [owner, admin, member]) {
    isError(t, await call(server, user.cookie, 'GET', `/v1/workspaces/${id}`), 404, 'not_found');
    t.equal((await rows(server, 'select 1 from users where id = ?', [user.userId])).length, 1, 'the people stay');
  }
  isError(t, await call(server, admin.cookie, 'POST', '/v1/invitations/accept', { token: invitation.body.token }), 404, 'not_found');
});

t.test('a user of workspace A acting on workspace B gets 404 and nothing changes', async (t) => {
  const server = await sharedTestServer();
  const alice = await signUp(server);
  const mallory = await signUp(server);
  const victim = await signUp(server);
  const target = (await call(server, alice.cookie, 'POST', '/v1/workspaces', { name: 'Target' })).body.id;
  await addMember(server, alice.cookie, target, victim, 'member');
  const pending = await call(server, alice.cookie, 'POST', `/v1/workspaces/${target}/invitations`, { email: 'pending@example.com', role: 'admin' });
  const invitationId = pending.body.id;
  const before = await workspaceState(server, target);
  const malloryBefore = await workspaceState(server, mallory.workspaceId);

  const attempts: Array<[string, 'GET' | 'POST' | 'PATCH' | 'DELETE', string, unknown?]> = [
    ['read', 'GET', `/v1/workspaces/${target}`],
    ['rename', 'PATCH', `/v1/workspaces/${target}`, { name: 'Owned' }],
    ['delete', 'DELETE', `/v1/workspaces/${target}`],
    ['list members', 'GET', `/v1/workspaces/${target}/members`],
    ['promote', 'PATCH', `/v1/workspaces/${target}/members/${victim.userId}`, { role: 'admin' }],
    ['remove a member', 'DELETE', `/v1/workspaces/${target}/members/${victim.userId}`],
    ['take ownership', 'POST', `/v1/workspaces/${target}/transfer`, { userId: mallory.userId }],
    ['leave', 'POST', `/v1/workspaces/${target}/leave`],
    ['invite themselves', 'POST', `/v1/workspaces/${target}/invitations`, { email: mallory.email, role: 'admin' }],
    ['list invitations', 'GET', `/v1/workspaces/${target}/invitations`],
    ['cancel an invitation', 'DELETE', `/v1/workspaces/${target}/invitations/${invitationId}`],
    // Their own workspace in the path, the other's resources after it.
    ["cancel B's invitation through A", 'DELETE', `/v1/workspaces/${mallory.workspaceId}/invitations/${invitationId}`],
    ["change a B member's role through A", 'PATCH', `/v1/workspaces/${mallory.workspaceId}/members/${victim.userId}`, { role: 'admin' }],
    ['remove a B member through A', 'DELETE', `/v1/workspaces/${mallory.workspaceId}/members/${victim.userId}`],
    ['transfer A to a B member', 'POST', `/v1/workspaces/${mallory.workspaceId}/transfer`, { userId: victim.userId }],
  ];
  const missing = await call(server, mallory.cookie, 'GET', '/v1/workspaces/ws_00000000000000000000000000');
  isError(t, missing, 404, 'not_found');
  for (const [what, method, path, body] of attempts) {
    const response = await call(server, mallory.cookie, method, path, body);
    t.ok([403, 404, 409].includes(response.status), `${what}: ${response.status}`);
    if (path.includes(target)) {
      isError(t, response, 404, 'not_found');
      t.equal(
        response.body.error.message,
        missing.body.error.message.replace('ws_00000000000000000000000000', target),
        `${what}: answered exactly as a missing workspace`,
      );
    } else if (method === 'POST') {
      isError(t, response, 409, 'conflict', /not a member/);
    } else {
      isError(t, response, 404, 'not_found');
    }
  }
  t.same(await workspaceState(server, target), before, 'workspace B is as it was');
  t.same(await workspaceState(server, mallory.workspaceId), malloryBefore, 'and so is A');
  t.notOk(
    (await call(server, mallory.cookie, 'GET', '/v1/workspaces')).body.data.some((w: any) => w.id === target),
    "B never shows in A's list",
  );
});

t.test('API keys read their own workspace only; settings and people are for signed-in users', async (t) => {
  const server = await startTestServer(t);
  const ada = await signUp(server);
  const eve = await signUp(server);
  const key = await createKey(server, ada.cookie, ada.workspaceId, ['generations.read']);
  const before = await workspaceState(server, ada.workspaceId);
  const eveBefore = await workspaceState(server, eve.workspaceId);

  const own = await call(server, key.key, 'GET', `/v1/workspaces/${ada.workspaceId}`);
  t.equal(own.status, 200);
  t.equal(own.body.id, ada.workspaceId);
  t.equal(own.body.role, null, 'a key has no role');
  const list = await call(server, key.key, 'GET', `/v1/workspaces?workspaceId=${ada.workspaceId}`);
  t.equal(list.status, 200);
  t.same(
    list.body.data.map((w: any) => w.id),
    [ada.workspaceId],
    'a key lists only its own workspace',
  );

  isError(t, await call(server, key.key, 'GET', `/v1/workspaces/${eve.workspaceId}`), 403, 'forbidden');
  isError(t, await call(server, key.key, 'GET', `/v1/workspaces?workspaceId=${eve.workspaceId}`), 403, 'forbidden');
  isError(t, await call(server, key.key, 'GET', '/v1/workspaces'), 403, 'forbidden', /workspace/);

  const refused: Array<['GET' | 'POST' | 'PATCH' | 'DELETE', string, unknown?]> = [
    ['PATCH', `/v1/workspaces/${ada.workspaceId}`, { name: 'By key' }],
    ['DELETE', `/v1/workspaces/${ada.workspaceId}`],
    ['GET', `/v1/workspaces/${ada.workspaceId}/members`],
    ['POST', `/v1/workspaces/${ada.workspaceId}/invitations`, { email: 'friend@example.com' }],
    ['GET', `/v1/workspaces/${ada.workspaceId}/invitations`],
    ['PATCH', `/v1/workspaces/${ada.workspaceId}/members/${ada.userId}`, { role: 'admin' }],
    ['DELETE', `/v1/workspaces/${ada.workspaceId}/members/${ada.userId}`],
    ['POST', `/v1/workspaces/${ada.workspaceId}/transfer`, { userId: ada.userId }],
    ['POST', `/v1/workspaces/${ada.workspaceId}/leave`],
    ['POST', '/v1/invitations/accept', { token: `gsi_${'a'.repeat(43)}` }],
    ['PATCH', `/v1/workspaces/${eve.workspaceId}`, { name: 'By key' }],
    ['DELETE', `/v1/workspaces/${eve.workspaceId}`],
  ];
  for (const [method, path, body] of refused) {
    const response = await call(server, key.key, method, path, body);
    isError(t, response, 403, 'forbidden');
  }
  isError(t, await call(server, key.key, 'POST', '/v1/workspaces', { name: 'By key' }), 403, 'forbidden');
  t.same(await workspaceState(server, ada.workspaceId), before, "nothing changed in the key's workspace");
  t.same(await workspaceState(server, eve.workspaceId), eveBefore, 'nor in another');
  t.equal((await rows(server, 'select 1 from workspaces')).length, 2, 'no workspace made');
});

t.test("deletion is refused with 409 while a generation is not finished, and then takes the workspace's keys with it", async (t) => {
  const server = await sharedTestServer();
  const ada = await signUp(server);
  const id = (await call(server, ada.cookie, 'POST', '/v1/workspaces', { name: 'Busy' })).body.id;
  const key = await createKey(server, ada.cookie, id, ['all']);
  t.equal((await call(server, key.key, 'GET', `/v1/workspaces/${id}`)).status, 200, 'the key works');
  await generation(server, id, 'succeeded');
  await generation(server, ada.workspaceId, 'running');
  const file = await storedAsset(server, id);
  const kept = await storedAsset(server, ada.workspaceId);

  for (const status of ['queued', 'reserved', 'submitted', 'running']) {
    const running = await generation(server, id, status);
    const before = await workspaceState(server, id);
    isError(t, await call(server, ada.cookie, 'DELETE', `/v1/workspaces/${id}`), 409, 'conflict', /1 generation is still queued or running/);
    t.same(await workspaceState(server, id), before, `nothing deleted while one is ${status}`);
    await rows(server, 'update generations set status = ? where id = ?', [status === 'queued' ? 'expired' : 'failed', running]);
  }
  t.equal((await call(server, key.key, 'GET', `/v1/workspaces/${id}`)).status, 200, 'the key still works');

  t.equal((await call(server, ada.cookie, 'DELETE', `/v1/workspaces/${id}`)).status, 204, 'finished generations do not block');
  t.same(await workspaceState(server, id), { workspace: [], members: [], invitations: [], keys: [] });
  t.same(await rows(server, 'select 1 from generations where workspace_id = ?', [id]), [], 'its generations went with it');
  t.same(await rows(server, 'select 1 from assets where workspace_id = ?', [id]), [], 'and its assets');
  t.equal(await server.services.blobs.stat(file), undefined, 'and their files');
  t.ok(await server.services.blobs.stat(kept), "another workspace's file stays");
  isError(t, await call(server, key.key, 'GET', `/v1/workspaces/${id}`), 401, 'unauthenticated', /not valid/);
  t.equal((await call(server, ada.cookie, 'GET', `/v1/workspaces/${ada.workspaceId}`)).status, 200, 'other workspaces stay');
  isError(t, await call(server, ada.cookie, 'DELETE', `/v1/workspaces/${id}`), 404, 'not_found');
  isError(
    t,
    await call(server, ada.cookie, 'DELETE', `/v1/workspaces/${ada.workspaceId}`),
    409,
    'conflict',
    "the other workspace's running generation counts there",
  );
});

import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { sharedTestServer } from '../helpers/server.ts';
import { createKey, logIn, signUp } from '../helpers/identity.ts';
import { addMember, call, generation, isError, rows, storedAsset, workspaceState } from './support.ts';

t.test("a data export is a JSON file of the user's data, never a secret, downloadable by its owner only", async (t) => {
  const server = await sharedTestServer();
  const ada = await signUp(server, { name: 'Ada' });
  await logIn(server, ada.email, ada.password);
  const bob = await signUp(server, { name: 'Bob' });
  const team = (await call(server, bob.cookie, 'POST', '/v1/workspaces', { name: "Bob's team" })).body.id;
  await addMember(server, bob.cookie, team, ada, 'admin');
  const invitation = await call(server, ada.cookie, 'POST', `/v1/workspaces/${team}/invitations`, { email: 'friend@example.com' });
  const key = await createKey(server, ada.cookie, ada.workspaceId, ['generations.read'], { name: "Ada's key" });

  const made = await call(server, ada.cookie, 'POST', '/v1/me/export-request');
  t.equal(made.status, 201);
  t.match(made.body, { id: /^exp_[0-9a-z]{26}$/, status: 'completed', downloadPath: `/v1/me/exports/${made.body.id}/download` });
  const [row] = await rows(server, 'select user_id, status, file_path, bytes, completed_at from export_requests where id = ?', [made.body.id]);
  t.equal(row.user_id, ada.userId);
  t.equal(row.status, 'completed');
  t.ok(row.completed_at);
  const file = path.join(server.config.dataDir, row.file_path);
  t.ok(file.startsWith(path.join(server.config.dataDir, 'exports')), "under the data directory's exports/");
  t.equal(fs.statSync(file).size, Number(row.bytes));
  t.equal(made.body.bytes, Number(row.bytes));

  const download = await server.fetch(made.body.downloadPath, { headers: { cookie: ada.cookie } });
  t.equal(download.status, 200);
  t.match(download.headers.get('content-type'), /^application\/json/);
  t.match(download.headers.get('content-disposition'), new RegExp(`attachment; filename="${made.body.id}.json"`));
  const text = await download.text();
  t.equal(text, fs.readFileSync(file, 'utf8'), 'the stored file, as is');
  const data = JSON.parse(text);
  t.equal(data.format, 'generation-service-export/1');
  t.match(data.user, { id: ada.userId, email: ada.email, name: 'Ada', hasPassword: true });
  t.same(
    data.memberships.map((m: any) => [m.workspaceId, m.role]).sort(),
    [
      [ada.workspaceId, 'owner'],
      [team, 'admin'],
    ].sort(),
  );
  t.same(
    data.linkedAccounts.map((a: any) => a.provider),
    ['password'],
  );
  t.equal(data.sessions.length, 2, 'both sessions, as metadata');
  t.same(Object.keys(data.sessions[0]).sort(), ['createdAt', 'expiresAt', 'id', 'ip', 'lastSeenAt', 'userAgent']);
  t.same(
    data.invitationsSent.map((i: any) => i.id),
    [invitation.body.id],
  );
  t.same(
    data.apiKeysCreated.map((k: any) => [k.id, k.name]),
    [[key.id, "Ada's key"]],
  );

  const secrets = [
    ...(await rows(server, 'select password_hash as s from users where id = ?', [ada.userId])),
    ...(await rows(server, 'select token_hash as s from sessions where user_id = ?', [ada.userId])),
    ...(await rows(server, 'select key_hash as s from api_keys where created_by = ?', [ada.userId])),
    ...(await rows(server, 'select token_hash as s from invitations where invited_by = ?', [ada.userId])),
  ].map((r) => r.s as string);
  t.equal(secrets.length, 5);
  for (const secret of [...secrets, key.key, invitation.body.token, ada.password])
    t.notOk(text.includes(secret), 'no hash, key, token or password in the file');
  t.same(text.match(/.{0,40}(password_?hash|token_?hash|key_?hash).{0,40}/i), null, 'no hash field at all');

  isError(t, await call(server, bob.cookie, 'GET', made.body.downloadPath), 404, 'not_found', 'another user cannot download it');
  isError(t, await call(server, undefined, 'GET', made.body.downloadPath), 401, 'unauthenticated');
  isError(t, await call(server, ada.cookie, 'GET', '/v1/me/exports/exp_00000000000000000000000000/download'), 404, 'not_found');

  fs.rmSync(file);
  isError(t, await call(server, ada.cookie, 'GET', made.body.downloadPath), 404, 'not_found', /no longer kept/);
});

t.test('deleting the account is refused with 409 while it owns a workspace with other members', async (t) => {
  const server = await sharedTestServer();
  const ada = await signUp(server);
  const bob = await signUp(server);
  const team = (await call(server, ada.cookie, 'POST', '/v1/workspaces', { name: 'Shared' })).body.id;
  await addMember(server, ada.cookie, team, bob);
  const user = async () => ({
    user: await rows(server, 'select id, email from users where id = ?', [ada.userId]),
    sessions: await rows(server, 'select id from sessions where user_id = ?', [ada.userId]),
    team: await workspaceState(server, team),
    personal: await workspaceState(server, ada.workspaceId),
  });
  const before = await user();
  isError(t, await call(server, ada.cookie, 'DELETE', '/v1/me'), 409, 'conflict', new RegExp(`other members \\(${team}\\)`));
  t.same(await user(), before, 'nothing deleted, not even the personal workspace');
  t.equal((await call(server, ada.cookie, 'GET', '/v1/me')).status, 200, 'still signed in');

  // Once the team is Bob's, only Ada's personal workspace would go; a running generation there still blocks.
  t.equal((await call(server, ada.cookie, 'POST', `/v1/workspaces/${team}/transfer`, { userId: bob.userId })).status, 200);
  const running = await generation(server, ada.workspaceId, 'running');
  const guarded = await user();
  isError(t, await call(server, ada.cookie, 'DELETE', '/v1/me'), 409, 'conflict', /generation is still queued or running/);
  t.same(await user(), guarded, 'nothing deleted');

  await rows(server, `update generations set status = 'succeeded' where id = ?`, [running]);
  t.equal((await call(server, ada.cookie, 'DELETE', '/v1/me')).status, 204, 'an admin elsewhere and the owner of a finished personal workspace can go');
  t.same(await rows(server, 'select user_id, role from workspace_members where workspace_id = ?', [team]), [{ user_id: bob.userId, role: 'owner' }]);
});

t.test('deleting the account removes the user, sessions, personal data and solely owned workspaces, and keeps shared ones', async (t) => {
  const server = await sharedTestServer();
  const ada = await signUp(server);
  const secondSession = await logIn(server, ada.email, ada.password);
  const bob = await signUp(server);
  const bobs = (await call(server, bob.cookie, 'POST', '/v1/workspaces', { name: "Bob's" })).body.id;
  await addMember(server, bob.cookie, bobs, ada, 'admin');
  const invited = await call(server, ada.cookie, 'POST', `/v1/workspaces/${bobs}/invitations`, { email: 'friend@example.com' });
  const solo = (await call(server, ada.cookie, 'POST', '/v1/workspaces', { name: 'Solo' })).body.id;
  const soloKey = await createKey(server, ada.cookie, solo, ['all']);
  const soloFile = await storedAsset(server, solo);
  const bobsFile = await storedAsset(server, bobs);
  const bobsKey = await createKey(server, ada.cookie, bobs, ['all']);
  const exported = await call(server, ada.cookie, 'POST', '/v1/me/export-request');
  const [exportRow] = await rows(server, 'select file_path from export_requests where id = ?', [exported.body.id]);
  const exportFile = path.join(server.config.dataDir, exportRow.file_path);
  t.ok(fs.existsSync(exportFile));
  t.equal((await call(server, soloKey.key, 'GET', `/v1/workspaces/${solo}`)).status, 200);

  const deleted = await call(server, ada.cookie, 'DELETE', '/v1/me');
  t.equal(deleted.status, 204);
  t.match(deleted.headers.get('set-cookie'), /^gs_session=; .*Max-Age=0/, 'the browser is told to forget the cookie');

  for (const [table, column] of [
    ['users', 'id'],
    ['sessions', 'user_id'],
    ['linked_accounts', 'user_id'],
    ['workspace_members', 'user_id'],
    ['export_requests', 'user_id'],
  ]) {
    t.same(await rows(server, `select 1 from ${table} where ${column} = ?`, [ada.userId]), [], `nothing left in ${table}`);
  }
  t.notOk(fs.existsSync(exportFile), 'the export file is gone');
  t.same(await workspaceState(server, ada.workspaceId), { workspace: [], members: [], invitations: [], keys: [] }, 'the personal workspace is gone');
  t.same((await workspaceState(server, solo)).workspace, [], 'so is the other workspace only they belonged to');
  isError(t, await call(server, soloKey.key, 'GET', `/v1/workspaces/${solo}`), 401, 'unauthenticated', 'its keys stop at once');
  t.equal(await server.services.blobs.stat(soloFile), undefined, 'its files are gone');
  t.ok(await server.services.blobs.stat(bobsFile), "the shared workspace's files stay");

  const shared = await workspaceState(server, bobs);
  t.same(shared.members, [{ user_id: bob.userId, role: 'owner' }], 'the shared workspace stays, without them');
  t.same(
    await rows(server, 'select invited_by, status from invitations where id = ?', [invited.body.id]),
    [{ invited_by: null, status: 'pending' }],
    'their invitation stays with the workspace, no longer naming them',
  );
  t.equal(
    (await call(server, bobsKey.key, 'GET', `/v1/workspaces/${bobs}`)).status,
    200,
    'a key they made for a shared workspace belongs to it and keeps working',
  );

  isError(t, await call(server, ada.cookie, 'GET', '/v1/me'), 401, 'unauthenticated');
  isError(t, await call(server, secondSession, 'GET', '/v1/me'), 401, 'unauthenticated', 'every session ended');
  isError(
    t,
    await server.json('/v1/auth/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: ada.email, password: ada.password }),
    }),
    401,
    'unauthenticated',
    'the account cannot sign in',
  );
  const again = await signUp(server, { email: ada.email });
  t.not(again.userId, ada.userId, 'the e-mail is free again');
});

import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { sharedTestServer, startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { sha256Hex } from '../../http/auth/tokens.ts';

async function rows<T = any>(server: TestServer, sql: string, params: unknown[] = []): Promise<T[]> {
  return server.services.db.em().execute(sql, params);
}

function send(server: TestServer, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  return server.json(path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

/** A route that accepts any key of its workspace: GET /v1/workspaces/:workspaceId. */
function useKey(server: TestServer, key: string, workspaceId: string) {
  return server.json(`/v1/workspaces/${workspaceId}`, { headers: withKey(key) });
}

t.test('create returns the plaintext once; only its SHA-256 is stored; list shows the prefix and never the secret', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const res = await send(server, 'POST', '/v1/api-keys', withCookie(owner.cookie), {
    workspaceId: owner.workspaceId,
    name: '  CI deploys ',
    scopes: ['generations.write', 'generations.read'],
  });
  t.equal(res.status, 201);
  t.equal(res.headers.get('cache-control'), 'no-store');
  const created = res.body;
  t.match(created.key, /^gs_live_[A-Za-z0-9]{64}$/);
  t.match(created, {
    id: /^key_[0-9a-z]{26}$/,
    workspaceId: owner.workspaceId,
    name: 'CI deploys',
    prefix: created.key.slice(0, 12),
    scopes: ['generations.write', 'generations.read'],
    expiresAt: null,
    revoked: false,
    revokedAt: null,
    lastUsedAt: null,
  });
  t.ok(Date.parse(created.createdAt));

  const [stored] = await rows(server, 'select key_hash, prefix, created_by from api_keys where id = ?', [created.id]);
  t.equal(stored.key_hash, sha256Hex(created.key), 'SHA-256 hex of the plaintext');
  t.equal(stored.created_by, owner.userId);
  const dump = JSON.stringify(await rows(server, 'select * from api_keys'));
  t.notOk(dump.includes(created.key), 'the plaintext is stored nowhere');

  const list = await server.json(`/v1/api-keys?workspaceId=${owner.workspaceId}`, { headers: withCookie(owner.cookie) });
  t.equal(list.status, 200);
  t.equal(list.body.data.length, 1);
  t.same(Object.keys(list.body.data[0]).sort(), [
    'createdAt',
    'expiresAt',
    'id',
    'lastUsedAt',
    'limits',
    'name',
    'prefix',
    'revoked',
    'revokedAt',
    'scopes',
    'workspaceId',
  ]);
  const text = JSON.stringify(list.body);
  t.notOk(text.includes(created.key.slice(12)), 'no plaintext in the list');
  t.notOk(text.includes(stored.key_hash), 'no hash in the list');
  t.equal(list.body.nextCursor, null);

  const works = await useKey(server, created.key, owner.workspaceId);
  t.equal(works.status, 200, 'the new key authenticates');
});

t.test('list pages newest first with a cursor', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await createKey(server, owner.cookie, owner.workspaceId, ['all'], { name: `k${i}` })).id);
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { body: any } = await server.json(`/v1/api-keys?workspaceId=${owner.workspaceId}&limit=2${cursor ? `&cursor=${cursor}` : ''}`, {
      headers: withCookie(owner.cookie),
    });
    t.ok(page.body.data.length <= 2);
    seen.push(...page.body.data.map((k: { id: string }) => k.id));
    cursor = page.body.nextCursor;
  } while (cursor);
  t.same(seen, [...ids].reverse());
  const bad = await server.json(`/v1/api-keys?workspaceId=${owner.workspaceId}&cursor=garbage`, { headers: withCookie(owner.cookie) });
  t.equal(bad.status, 400);
  for (const limit of ['0', '101', 'x']) {
    const res = await server.json(`/v1/api-keys?workspaceId=${owner.workspaceId}&limit=${limit}`, { headers: withCookie(owner.cookie) });
    t.equal(res.status, 400, `limit=${limit}`);
  }
  const missing = await server.json('/v1/api-keys', { headers: withCookie(owner.cookie) });
  t.equal(missing.status, 400, 'workspaceId is required');
});

t.test('bad input is refused with validation_error and creates nothing', async (t) => {
  const clock = new ManualClock();
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server);
  const past = new Date(clock.now() - 1000).toISOString();
  const base = { workspaceId: owner.workspaceId, name: 'k', scopes: ['all'] };
  const cases: Array<[string, unknown, RegExp]> = [
    ['unknown scope', { ...base, scopes: ['admin'] }, /body\.scopes/],
    ['no scopes', { ...base, scopes: [] }, /body\.scopes/],
    ['duplicate scopes', { ...base, scopes: ['all', 'all'] }, /body\.scopes/],
    ['scopes of the wrong type', { ...base, scopes: 'all' }, /body\.scopes/],
    ['over-long name', { ...base, name: 'n'.repeat(101) }, /body\.name/],
    ['blank name', { ...base, name: '   ' }, /body\.name/],
    ['name of the wrong type', { ...base, name: 7 }, /body\.name/],
    ['expiry in the past', { ...base, expiresAt: past }, /expiresAt: must be in the future/],
    ['expiry now', { ...base, expiresAt: new Date(clock.now()).toISOString() }, /expiresAt: must be in the future/],
    ['expiry not a date', { ...base, expiresAt: 'tomorrow' }, /body\.expiresAt/],
    ['missing workspace', { name: 'k', scopes: ['all'] }, /workspaceId/],
    ['unknown field', { ...base, hash: 'x' }, /unknown field "hash"/],
  ];
  for (const [label, body, message] of cases) {
    const res = await send(server, 'POST', '/v1/api-keys', withCookie(owner.cookie), body);
    t.equal(res.status, 400, label);
    t.equal(res.body.error.code, 'validation_error', label);
    t.match(res.body.error.message, message, label);
  }
  t.same(await rows(server, 'select id from api_keys'), [], 'no key was made');

  const key = await createKey(server, owner.cookie, owner.workspaceId);
  const patches: Array<[string, unknown]> = [
    ['empty patch', {}],
    ['unknown scope', { scopes: ['everything'] }],
    ['expiry in the past', { expiresAt: past }],
    ['revoked of the wrong type', { revoked: 'yes' }],
    ['over-long name', { name: 'n'.repeat(101) }],
  ];
  for (const [label, body] of patches) {
    const res = await send(server, 'PATCH', `/v1/api-keys/${key.id}`, withCookie(owner.cookie), body);
    t.equal(res.status, 400, label);
    t.equal(res.body.error.code, 'validation_error', label);
  }
  const [row] = await rows(server, 'select name, scopes, expires_at, revoked_at from api_keys where id = ?', [key.id]);
  t.same(
    { ...row, scopes: typeof row.scopes === 'string' ? JSON.parse(row.scopes) : row.scopes },
    { name: 'test key', scopes: ['all'], expires_at: null, revoked_at: null },
    'the key is unchanged',
  );
  for (const [from, to] of [
    ['2026-02-01', '2026-01-01'],
    ['2024-01-01', '2026-01-01'],
    ['2026-13-01', '2026-01-01'],
  ]) {
    const res = await server.json(`/v1/api-keys/${key.id}/usage?from=${from}&to=${to}`, { headers: withCookie(owner.cookie) });
    t.equal(res.status, 400, `usage ${from}..${to}`);
  }
});

t.test('update changes name, scopes and expiry; the change applies to the very next request', async (t) => {
  const clock = new ManualClock();
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['all']);
  t.equal((await useKey(server, key.key, owner.workspaceId)).status, 200, 'cached now');

  const expiresAt = new Date(clock.now() + 3_600_000).toISOString();
  const res = await send(server, 'PATCH', `/v1/api-keys/${key.id}`, withCookie(owner.cookie), { name: 'renamed', scopes: ['usage.read'], expiresAt });
  t.equal(res.status, 200);
  t.match(res.body, { id: key.id, name: 'renamed', scopes: ['usage.read'], expiresAt, revoked: false });
  const list = await server.json(`/v1/api-keys?workspaceId=${owner.workspaceId}`, { headers: withCookie(owner.cookie) });
  t.match(list.body.data[0], { name: 'renamed', scopes: ['usage.read'], expiresAt });

  // The cached record had scope all; the next request sees the new expiry.
  clock.advance(3_600_000);
  const expired = await useKey(server, key.key, owner.workspaceId);
  t.equal(expired.status, 401);
  t.match(expired.body.error.message, /expired/);

  const cleared = await send(server, 'PATCH', `/v1/api-keys/${key.id}`, withCookie(owner.cookie), { expiresAt: null });
  t.equal(cleared.body.expiresAt, null);
  t.equal((await useKey(server, key.key, owner.workspaceId)).status, 200, 'no expiry any more');
});

t.test('revocation (PATCH revoked or DELETE) takes effect on the very next request despite the cache', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const a = await createKey(server, owner.cookie, owner.workspaceId);
  const b = await createKey(server, owner.cookie, owner.workspaceId);
  for (const k of [a, b]) t.equal((await useKey(server, k.key, owner.workspaceId)).status, 200);
  t.ok(server.services.keyCache.size >= 2, 'both keys are cached');

  const revoked = await send(server, 'PATCH', `/v1/api-keys/${a.id}`, withCookie(owner.cookie), { revoked: true });
  t.equal(revoked.status, 200);
  t.equal(revoked.body.revoked, true);
  t.ok(Date.parse(revoked.body.revokedAt));
  const next = await useKey(server, a.key, owner.workspaceId);
  t.equal(next.status, 401);
  t.equal(next.body.error.code, 'unauthenticated');
  t.match(next.body.error.message, /revoked/);

  const deleted = await send(server, 'DELETE', `/v1/api-keys/${b.id}`, withCookie(owner.cookie));
  t.equal(deleted.status, 200);
  t.equal(deleted.body.revoked, true);
  t.equal((await useKey(server, b.key, owner.workspaceId)).status, 401);
  const again = await send(server, 'DELETE', `/v1/api-keys/${b.id}`, withCookie(owner.cookie));
  t.equal(again.status, 200, 'deleting twice is fine');
  t.equal(again.body.revokedAt, deleted.body.revokedAt, 'and keeps the first revocation time');

  const restore = await send(server, 'PATCH', `/v1/api-keys/${a.id}`, withCookie(owner.cookie), { revoked: false });
  t.equal(restore.status, 409);
  t.equal(restore.body.error.code, 'conflict');
  t.equal((await useKey(server, a.key, owner.workspaceId)).status, 401, 'still revoked');
  const list = await server.json(`/v1/api-keys?workspaceId=${owner.workspaceId}`, { headers: withCookie(owner.cookie) });
  t.same(
    list.body.data.map((k: { revoked: boolean }) => k.revoked),
    [true, true],
    'revoked keys stay listed, marked',
  );
});

t.test('tenant isolation: keys of another workspace are 404 to strangers, 403 to members, and nothing changes', async (t) => {
  const server = await startTestServer(t);
  const alice = await signUp(server);
  const mallory = await signUp(server);
  const aliceKey = await createKey(server, alice.cookie, alice.workspaceId);
  const before = await rows(server, 'select * from api_keys order by id');

  const attempts: Array<[string, string, unknown?]> = [
    ['GET', `/v1/api-keys/${aliceKey.id}/usage`],
    ['PATCH', `/v1/api-keys/${aliceKey.id}`, { name: 'pwned' }],
    ['PATCH', `/v1/api-keys/${aliceKey.id}`, { revoked: true }],
    ['DELETE', `/v1/api-keys/${aliceKey.id}`],
  ];
  for (const [method, path, body] of attempts) {
    const res = await send(server, method, path, withCookie(mallory.cookie), body);
    t.equal(res.status, 404, `${method} ${path}`);
    t.equal(res.body.error.code, 'not_found');
    const missing = await send(server, method, path.replace(aliceKey.id, 'key_00000000000000000000000000'), withCookie(mallory.cookie), body);
    t.equal(missing.body.error.message.replace(/key_\w+/, ''), res.body.error.message.replace(/key_\w+/, ''), 'the same answer as for a missing key');
  }
  const list = await server.json(`/v1/api-keys?workspaceId=${alice.workspaceId}`, { headers: withCookie(mallory.cookie) });
  t.equal(list.status, 404, 'listing another workspace is 404');
  const create = await send(server, 'POST', '/v1/api-keys', withCookie(mallory.cookie), { workspaceId: alice.workspaceId, name: 'backdoor', scopes: ['all'] });
  t.equal(create.status, 404, 'creating in another workspace is 404');

  t.same(await rows(server, 'select * from api_keys order by id'), before, 'no key changed or was added');
  t.equal((await useKey(server, aliceKey.key, alice.workspaceId)).status, 200, "alice's key still works");
});

t.test('a plain member of the workspace may not manage its keys (403); an admin may', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const member = await signUp(server);
  const admin = await signUp(server);
  const at = new Date();
  await rows(server, `insert into workspace_members (workspace_id, user_id, role, created_at) values (?, ?, 'member', ?), (?, ?, 'admin', ?)`, [
    owner.workspaceId,
    member.userId,
    at,
    owner.workspaceId,
    admin.userId,
    at,
  ]);
  const key = await createKey(server, owner.cookie, owner.workspaceId);
  const before = await rows(server, 'select * from api_keys order by id');

  for (const [method, path, body] of [
    ['GET', `/v1/api-keys?workspaceId=${owner.workspaceId}`],
    ['POST', '/v1/api-keys', { workspaceId: owner.workspaceId, name: 'k', scopes: ['all'] }],
    ['PATCH', `/v1/api-keys/${key.id}`, { revoked: true }],
    ['DELETE', `/v1/api-keys/${key.id}`],
    ['GET', `/v1/api-keys/${key.id}/usage`],
  ] as Array<[string, string, unknown?]>) {
    const res = await send(server, method, path, withCookie(member.cookie), body);
    t.equal(res.status, 403, `member: ${method} ${path}`);
    t.equal(res.body.error.code, 'forbidden');
  }
  t.same(await rows(server, 'select * from api_keys order by id'), before, 'nothing changed');

  const made = await createKey(server, admin.cookie, owner.workspaceId, ['assets.read']);
  t.ok(made.id, 'an admin creates keys');
  const revoke = await send(server, 'DELETE', `/v1/api-keys/${key.id}`, withCookie(admin.cookie));
  t.equal(revoke.status, 200, 'and revokes them');
});

t.test('API keys cannot call any /v1/api-keys endpoint (403), not even with scope all', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['all']);
  for (const [method, path, body] of [
    ['GET', `/v1/api-keys?workspaceId=${owner.workspaceId}`],
    ['POST', '/v1/api-keys', { workspaceId: owner.workspaceId, name: 'k', scopes: ['all'] }],
    ['PATCH', `/v1/api-keys/${key.id}`, { name: 'self-renamed', workspaceId: owner.workspaceId }],
    ['DELETE', `/v1/api-keys/${key.id}?workspaceId=${owner.workspaceId}`],
    ['GET', `/v1/api-keys/${key.id}/usage?workspaceId=${owner.workspaceId}`],
  ] as Array<[string, string, unknown?]>) {
    const res = await send(server, method, path, withKey(key.key), body);
    t.equal(res.status, 403, `${method} ${path}`);
    t.equal(res.body.error.code, 'forbidden');
  }
  const [row] = await rows(server, 'select name, revoked_at from api_keys where id = ?', [key.id]);
  t.same(row, { name: 'test key', revoked_at: null });
  t.equal((await rows(server, 'select id from api_keys')).length, 1);
});

t.test('usage counts requests per UTC day and lastUsedAt is written at most once a minute', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 23, 58));
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId);
  const lastUsed = async () => {
    await server.services.keyUsage.flush();
    const [row] = await rows(server, 'select last_used_at from api_keys where id = ?', [key.id]);
    return row.last_used_at === null ? null : new Date(row.last_used_at).getTime();
  };
  t.equal(await lastUsed(), null, 'never used');
  const t0 = clock.now();
  for (let i = 0; i < 3; i++) t.equal((await useKey(server, key.key, owner.workspaceId)).status, 200);
  t.equal(await lastUsed(), t0);
  clock.advance(30_000);
  await useKey(server, key.key, owner.workspaceId);
  t.equal(await lastUsed(), t0, 'not rewritten within the minute');
  clock.advance(30_000);
  await useKey(server, key.key, owner.workspaceId);
  t.equal(await lastUsed(), t0 + 60_000, 'rewritten once the minute has passed');
  clock.advance(5 * 60_000);
  for (let i = 0; i < 2; i++) await useKey(server, key.key, owner.workspaceId);
  const listed = await server.json(`/v1/api-keys?workspaceId=${owner.workspaceId}`, { headers: withCookie(owner.cookie) });
  t.equal(Date.parse(listed.body.data[0].lastUsedAt), t0 + 6 * 60_000, 'the list shows lastUsedAt');

  // Generations attributed to the key are counted by the UTC day they were made, from the usage rollups
  // the service keeps with each generation it writes (rows written here directly add theirs too).
  const other = await createKey(server, owner.cookie, owner.workspaceId);
  const generation = async (id: string, keyId: string, at: string) => {
    await rows(
      server,
      `insert into generations (id, workspace_id, api_key_id, mode, model_id, status, params, inputs, payment_mode, credits, provider, timeline, queue_deadline, created_at, updated_at)
       values (?, ?, ?, 'text_to_text', 'm', 'succeeded', '{}', '{}', 'credits', 1, 'local', '[]', ?, ?, ?)`,
      [id, owner.workspaceId, keyId, at, at, at],
    );
    await rows(
      server,
      `insert into usage_rollups (workspace_id, day, api_key_id, total, succeeded) values (?, (?::timestamptz at time zone 'UTC')::date, ?, 1, 1)
       on conflict (workspace_id, day, api_key_id) do update set total = usage_rollups.total + 1, succeeded = usage_rollups.succeeded + 1`,
      [owner.workspaceId, at, keyId],
    );
  };
  await generation('gen_1', key.id, '2026-01-01T23:59:59.999Z');
  await generation('gen_2', key.id, '2026-01-02T00:00:00.000Z');
  await generation('gen_3', key.id, '2026-01-02T00:03:00.000Z');
  await generation('gen_4', other.id, '2026-01-02T00:03:00.000Z');
  await generation('gen_5', key.id, '2025-11-01T00:00:00.000Z');

  const usage = await server.json(`/v1/api-keys/${key.id}/usage`, { headers: withCookie(owner.cookie) });
  t.equal(usage.status, 200);
  t.same(
    usage.body.data,
    [
      { day: '2026-01-02', requests: 2, generations: 2 },
      { day: '2026-01-01', requests: 5, generations: 1 },
    ],
    'requests and generations by UTC day, newest first; other keys and days outside the range left out',
  );
  t.same(usage.body.totals, { requests: 7, generations: 3 });
  t.equal(usage.body.to, '2026-01-02');
  t.equal(usage.body.from, '2025-12-04');
  const oneDay = await server.json(`/v1/api-keys/${key.id}/usage?from=2026-01-01&to=2026-01-01`, { headers: withCookie(owner.cookie) });
  t.same(oneDay.body.data, [{ day: '2026-01-01', requests: 5, generations: 1 }]);
  const old = await server.json(`/v1/api-keys/${key.id}/usage?from=2025-11-01&to=2025-11-30`, { headers: withCookie(owner.cookie) });
  t.same(old.body.data, [{ day: '2025-11-01', requests: 0, generations: 1 }], 'a day with generations and no counted requests');
});

t.test('usage counted in memory is written when the service stops', async (t) => {
  const server = await startTestServer(t, { env: {} });
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId);
  for (let i = 0; i < 4; i++) await useKey(server, key.key, owner.workspaceId);
  t.ok(server.services.keyUsage.pending() > 0, 'counts are waiting in memory');
  // Stop the service but keep the database: read it through a second service on the same database.
  const em = server.services.db.em();
  const flushed: unknown[] = [];
  const original = server.services.db.close;
  server.services.db.close = async () => {
    flushed.push(...(await em.execute('select requests from api_key_usage where key_id = ?', [key.id])));
    await original.call(server.services.db);
  };
  await server.stop();
  t.same(
    flushed.map((r: any) => Number(r.requests)),
    [4],
    'the stop sequence wrote the counts before closing the database',
  );
});

import t from 'tap';
import { sharedTestServer, startTestServer } from '../helpers/server.ts';
import { authMatrix, createKey, signUp } from '../helpers/identity.ts';
import { addMember, call, isError, rows } from '../identity/support.ts';
import { MAX_ENDPOINTS_PER_WORKSPACE } from '../../actors/webhook/enqueue.ts';

const EVENTS = ['generation.completed', 'generation.failed', 'generation.cancelled', 'generation.expired'];

t.test('create, list, update and delete an endpoint with a key; the secret is shown once and stored sealed', async (t) => {
  const server = await sharedTestServer({ ALLOW_PRIVATE_EGRESS: 'true' });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['webhooks.manage']);

  const created = await call(server, key, 'POST', '/v1/webhooks', {
    workspaceId: user.workspaceId,
    url: 'http://127.0.0.1:9/hook',
    eventTypes: ['generation.completed', 'generation.failed'],
    description: 'orders',
  });
  t.equal(created.status, 201, JSON.stringify(created.body));
  t.match(created.body, {
    id: /^whk_/,
    workspaceId: user.workspaceId,
    url: 'http://127.0.0.1:9/hook',
    eventTypes: ['generation.completed', 'generation.failed'],
    description: 'orders',
    status: 'active',
    secret: /^whsec_[A-Za-z0-9_-]{43}$/,
  });
  t.equal(created.headers.get('cache-control'), 'no-store');
  const id = created.body.id as string;
  const secret = created.body.secret as string;

  const [stored] = await rows(server, 'select secret_sealed from webhook_endpoints where id = ?', [id]);
  t.notMatch(stored.secret_sealed, secret.slice(6), 'the secret is not stored in clear');
  t.match(stored.secret_sealed, /^v1\./);
  t.equal(server.services.webhookSecrets.open(stored.secret_sealed, id), secret, 'it opens with the configured key, for this row only');
  t.throws(() => server.services.webhookSecrets.open(stored.secret_sealed, 'whk_other'), 'bound to its row');

  const list = await call(server, key, 'GET', `/v1/webhooks?workspaceId=${user.workspaceId}`);
  t.equal(list.status, 200);
  t.equal(list.body.data.length, 1);
  t.equal(list.body.data[0].id, id);
  t.notOk('secret' in list.body.data[0], 'never listed again');
  t.equal(list.body.nextCursor, null);

  const patched = await call(server, key, 'PATCH', `/v1/webhooks/${id}`, {
    workspaceId: user.workspaceId,
    eventTypes: EVENTS,
    description: null,
    status: 'disabled',
  });
  t.equal(patched.status, 200, JSON.stringify(patched.body));
  t.match(patched.body, { id, eventTypes: EVENTS, description: null, status: 'disabled' });
  const [row] = await rows(server, 'select status, event_types, description from webhook_endpoints where id = ?', [id]);
  t.match(row, { status: 'disabled', description: null });
  t.same(row.event_types, EVENTS);

  isError(t, await call(server, key, 'PATCH', `/v1/webhooks/${id}`, { workspaceId: user.workspaceId }), 400, 'validation_error');

  const deleted = await call(server, key, 'DELETE', `/v1/webhooks/${id}?workspaceId=${user.workspaceId}`);
  t.equal(deleted.status, 200);
  t.same(deleted.body, { id, deleted: true });
  const [gone] = await rows(server, 'select deleted_at, secret_sealed from webhook_endpoints where id = ?', [id]);
  t.ok(gone.deleted_at, 'marked deleted');
  t.equal(gone.secret_sealed, '', 'its secret is wiped');
  t.same((await call(server, key, 'GET', `/v1/webhooks?workspaceId=${user.workspaceId}`)).body.data, []);
  isError(t, await call(server, key, 'PATCH', `/v1/webhooks/${id}`, { workspaceId: user.workspaceId, status: 'active' }), 404, 'not_found');
  isError(t, await call(server, key, 'DELETE', `/v1/webhooks/${id}?workspaceId=${user.workspaceId}`), 404, 'not_found');
  isError(t, await call(server, key, 'GET', `/v1/webhooks/${id}/deliveries?workspaceId=${user.workspaceId}`), 404, 'not_found');
});

t.test('refusals: unknown event names, bad URLs, private addresses through the egress guard, the endpoint cap', async (t) => {
  const server = await startTestServer(t);
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['webhooks.manage']);
  const create = (body: Record<string, unknown>) => call(server, key, 'POST', '/v1/webhooks', { workspaceId: user.workspaceId, ...body });

  isError(t, await create({ url: 'https://example.com/hook', eventTypes: ['generation.succeeded'] }), 400, 'validation_error');
  isError(t, await create({ url: 'https://example.com/hook', eventTypes: [] }), 400, 'validation_error');
  isError(t, await create({ url: 'https://example.com/hook', eventTypes: ['generation.failed', 'generation.failed'] }), 400, 'validation_error');
  isError(t, await create({ url: 'ftp://example.com/hook', eventTypes: ['generation.failed'] }), 400, 'validation_error', /http and https/);
  isError(t, await create({ url: 'https://user:pw@example.com/hook', eventTypes: ['generation.failed'] }), 400, 'validation_error', /credentials/);
  isError(t, await create({ url: 'http://127.0.0.1:8080/hook', eventTypes: ['generation.failed'] }), 400, 'validation_error', /not a public address/);
  isError(
    t,
    await create({ url: 'http://169.254.169.254/latest/meta-data', eventTypes: ['generation.failed'] }),
    400,
    'validation_error',
    /not a public address/,
  );
  isError(t, await create({ url: 'http://[::1]/hook', eventTypes: ['generation.failed'] }), 400, 'validation_error', /not a public address/);
  isError(t, await create({ url: 'http://localhost:8080/hook', eventTypes: ['generation.failed'] }), 400, 'validation_error', /not a public address/);
  t.equal(server.config.allowPrivateEgress, false, 'this server keeps the address check');
  // IPv6 forms that carry a refused IPv4 address: compatible (::/96), NAT64, 6to4.
  for (const host of ['::127.0.0.1', '::a00:1', '::a9fe:a9fe', '64:ff9b::169.254.169.254', '2002:7f00:1::1']) {
    isError(t, await create({ url: `http://[${host}]/hook`, eventTypes: ['generation.failed'] }), 400, 'validation_error', /not a public address/);
  }
  isError(t, await create({ url: 'https://example.com/hook', eventTypes: ['generation.failed'], extra: 1 }), 400, 'validation_error');
  t.same(await rows(server, 'select id from webhook_endpoints'), [], 'nothing was stored');

  // A public IP literal needs no DNS: the cap is reached with those.
  for (let i = 0; i < MAX_ENDPOINTS_PER_WORKSPACE; i++) {
    const ok = await create({ url: `https://93.184.215.14/hook/${i}`, eventTypes: ['generation.completed'] });
    t.equal(ok.status, 201, JSON.stringify(ok.body));
  }
  isError(t, await create({ url: 'https://93.184.215.14/hook/x', eventTypes: ['generation.completed'] }), 422, 'plan_limit_reached');
  const [{ count }] = await rows(server, 'select count(*)::int as count from webhook_endpoints where workspace_id = ?', [user.workspaceId]);
  t.equal(count, MAX_ENDPOINTS_PER_WORKSPACE);

  const first = (await call(server, key, 'GET', `/v1/webhooks?workspaceId=${user.workspaceId}&limit=15`)).body;
  t.equal(first.data.length, 15);
  const second = (await call(server, key, 'GET', `/v1/webhooks?workspaceId=${user.workspaceId}&limit=15&cursor=${first.nextCursor}`)).body;
  t.equal(second.data.length, 5);
  t.equal(second.nextCursor, null);
  t.equal(new Set([...first.data, ...second.data].map((e: { id: string }) => e.id)).size, 20, 'pages do not overlap');
  isError(
    t,
    await call(server, key, 'PATCH', `/v1/webhooks/${first.data[0].id}`, { workspaceId: user.workspaceId, url: 'http://10.0.0.1/x' }),
    400,
    'validation_error',
    /not a public address/,
  );
});

t.test('sessions: owners and admins manage webhooks, members may not, strangers see nothing', async (t) => {
  const server = await sharedTestServer({ ALLOW_PRIVATE_EGRESS: 'true' });
  const owner = await signUp(server);
  const admin = await signUp(server);
  const member = await signUp(server);
  const stranger = await signUp(server);
  await addMember(server, owner.cookie, owner.workspaceId, admin, 'admin');
  await addMember(server, owner.cookie, owner.workspaceId, member, 'member');

  const byAdmin = await call(server, admin.cookie, 'POST', '/v1/webhooks', {
    workspaceId: owner.workspaceId,
    url: 'http://127.0.0.1:9/a',
    eventTypes: ['generation.failed'],
  });
  t.equal(byAdmin.status, 201, JSON.stringify(byAdmin.body));
  const id = byAdmin.body.id as string;
  t.equal((await call(server, owner.cookie, 'GET', `/v1/webhooks?workspaceId=${owner.workspaceId}`)).body.data.length, 1);
  isError(t, await call(server, owner.cookie, 'GET', '/v1/webhooks'), 400, 'validation_error', /workspaceId/);

  isError(t, await call(server, member.cookie, 'GET', `/v1/webhooks?workspaceId=${owner.workspaceId}`), 403, 'forbidden');
  isError(
    t,
    await call(server, member.cookie, 'POST', '/v1/webhooks', {
      workspaceId: owner.workspaceId,
      url: 'http://127.0.0.1:9/m',
      eventTypes: ['generation.failed'],
    }),
    403,
    'forbidden',
  );
  isError(t, await call(server, member.cookie, 'PATCH', `/v1/webhooks/${id}`, { status: 'disabled' }), 403, 'forbidden');
  isError(t, await call(server, member.cookie, 'DELETE', `/v1/webhooks/${id}`), 403, 'forbidden');
  isError(t, await call(server, member.cookie, 'GET', `/v1/webhooks/${id}/deliveries`), 403, 'forbidden');

  isError(t, await call(server, stranger.cookie, 'GET', `/v1/webhooks?workspaceId=${owner.workspaceId}`), 404, 'not_found');
  isError(
    t,
    await call(server, stranger.cookie, 'POST', '/v1/webhooks', {
      workspaceId: owner.workspaceId,
      url: 'http://127.0.0.1:9/s',
      eventTypes: ['generation.failed'],
    }),
    404,
    'not_found',
  );
  isError(t, await call(server, stranger.cookie, 'PATCH', `/v1/webhooks/${id}`, { status: 'disabled' }), 404, 'not_found');
  isError(t, await call(server, stranger.cookie, 'DELETE', `/v1/webhooks/${id}`), 404, 'not_found');
  isError(t, await call(server, stranger.cookie, 'GET', `/v1/webhooks/${id}/deliveries`), 404, 'not_found');
  isError(t, await call(server, owner.cookie, 'PATCH', `/v1/webhooks/${id}`, { workspaceId: stranger.workspaceId, status: 'disabled' }), 404, 'not_found');

  const [row] = await rows(server, 'select status, deleted_at from webhook_endpoints where id = ?', [id]);
  t.match(row, { status: 'active', deleted_at: null }, 'no refused call changed it');
  t.equal((await call(server, owner.cookie, 'DELETE', `/v1/webhooks/${id}`)).status, 200, 'the owner deletes it');
});

t.test('tenant isolation: a key of another workspace never sees or touches an endpoint', async (t) => {
  const server = await sharedTestServer({ ALLOW_PRIVATE_EGRESS: 'true' });
  const a = await signUp(server);
  const b = await signUp(server);
  const keyA = (await createKey(server, a.cookie, a.workspaceId, ['webhooks.manage'])).key;
  const keyB = (await createKey(server, b.cookie, b.workspaceId, ['all'])).key;
  const created = await call(server, keyA, 'POST', '/v1/webhooks', {
    workspaceId: a.workspaceId,
    url: 'http://127.0.0.1:9/a',
    eventTypes: ['generation.failed'],
  });
  const id = created.body.id as string;

  t.same((await call(server, keyB, 'GET', `/v1/webhooks?workspaceId=${b.workspaceId}`)).body.data, [], 'B lists only its own');
  isError(t, await call(server, keyB, 'GET', `/v1/webhooks?workspaceId=${a.workspaceId}`), 403, 'forbidden');
  isError(
    t,
    await call(server, keyB, 'POST', '/v1/webhooks', { workspaceId: a.workspaceId, url: 'http://127.0.0.1:9/b', eventTypes: ['generation.failed'] }),
    403,
    'forbidden',
  );
  isError(t, await call(server, keyB, 'PATCH', `/v1/webhooks/${id}`, { workspaceId: b.workspaceId, status: 'disabled' }), 404, 'not_found');
  isError(t, await call(server, keyB, 'DELETE', `/v1/webhooks/${id}?workspaceId=${b.workspaceId}`), 404, 'not_found');
  isError(t, await call(server, keyB, 'GET', `/v1/webhooks/${id}/deliveries?workspaceId=${b.workspaceId}`), 404, 'not_found');
  isError(t, await call(server, keyB, 'PATCH', `/v1/webhooks/${id}`, { workspaceId: a.workspaceId, status: 'disabled' }), 403, 'forbidden');
  const [row] = await rows(server, 'select status, deleted_at from webhook_endpoints where id = ?', [id]);
  t.match(row, { status: 'active', deleted_at: null });
  t.equal((await call(server, keyA, 'GET', `/v1/webhooks/${id}/deliveries?workspaceId=${a.workspaceId}`)).status, 200, 'control: its own key reads it');
});

t.test('auth matrix over the webhook routes', async (t) => {
  const server = await startTestServer(t);
  await authMatrix(t, server, (route) => route.path.startsWith('/v1/webhooks'));
});

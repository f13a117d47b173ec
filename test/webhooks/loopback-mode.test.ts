import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';

/** Development mode (LOOPBACK_EGRESS): loopback receivers are accepted, every other private range still refused. */
t.test('with LOOPBACK_EGRESS=true a loopback receiver is accepted, other private addresses are not', async (t) => {
  const server = await startTestServer(t, { env: { LOOPBACK_EGRESS: 'true' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['webhooks.manage']);
  const create = (url: string) =>
    server.json('/v1/webhooks', {
      method: 'POST',
      headers: withKey(key),
      body: JSON.stringify({ workspaceId: user.workspaceId, url, eventTypes: ['generation.completed'] }),
    });
  for (const url of ['http://127.0.0.1:9000/hooks', 'http://localhost:9000/hooks', 'http://[::1]:9000/hooks']) {
    const res = await create(url);
    t.equal(res.status, 201, `${url}: 201`);
  }
  for (const url of ['http://10.0.0.1/hooks', 'http://169.254.169.254/latest', 'http://192.168.1.1/hooks', 'http://[fc00::1]/hooks']) {
    const res = await create(url);
    t.equal(res.status, 400, `${url}: 400`);
    t.match(res.body.error.message, /not a public address/, `${url}: refused by the guard`);
  }
});

t.test('without it (as in production), loopback receivers are refused', async (t) => {
  const server = await startTestServer(t, { env: { LOOPBACK_EGRESS: 'false' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['webhooks.manage']);
  const res = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({ workspaceId: user.workspaceId, url: 'http://127.0.0.1:9000/hooks', eventTypes: ['generation.completed'] }),
  });
  t.equal(res.status, 400);
  t.match(res.body.error.message, /not a public address/);
});

import net from 'node:net';
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../runtime/clock.ts';
import { newId } from '../../persistence/ids.ts';
import { sharedTestServer, startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, withKey } from '../helpers/identity.ts';
import { verifyWebhook } from '../../client/src/webhooks.ts';
import { cancelGeneration, createEndpoint, createGeneration, deliveries, historyWhen, startReceiver, tenant, type Tenant } from './support.ts';

const sendTest = (server: TestServer, who: Tenant, id: string) =>
  server.json(`/v1/webhooks/${id}/test?workspaceId=${who.workspaceId}`, { method: 'POST', headers: withKey(who.key) });

t.test("a test event is signed and sent now; the answer is the attempt's outcome; it is in no history", async (t) => {
  const server = await sharedTestServer({ ALLOW_PRIVATE_EGRESS: 'true' });
  const receiver = await startReceiver(t);
  receiver.behave((i) => ({ status: i === 0 ? 204 : 503 }));
  const who = await tenant(server);
  const endpoint = await createEndpoint(server, who, receiver.url);

  const ok = await sendTest(server, who, endpoint.id);
  t.equal(ok.status, 200);
  t.match(ok.body, { event: 'webhook.test', delivered: true, responseStatus: 204, error: null });
  t.type(ok.body.durationMs, 'number');
  t.match(ok.body.id, /^dlv_/);
  t.equal(receiver.received.length, 1, 'the receiver got it before the answer');
  const [request] = receiver.received;
  t.equal(request!.headers['x-service-event'], 'webhook.test');
  t.equal(request!.headers['x-service-delivery'], ok.body.id);
  t.match(request!.headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
  const event = verifyWebhook(request!.rawBody, request!.headers['x-service-signature'], endpoint.secret) as any;
  t.same(event, { id: ok.body.id, event: 'webhook.test', data: { endpointId: endpoint.id, workspaceId: who.workspaceId }, createdAt: event.createdAt });

  const failed = await sendTest(server, who, endpoint.id);
  t.equal(failed.status, 200, 'a failed attempt is an outcome, not an error of the request');
  t.match(failed.body, { delivered: false, responseStatus: 503, error: 'the endpoint answered 503' });
  t.same((await deliveries(server, who, endpoint.id)).data, [], 'not recorded as a delivery, and never retried');

  // Nobody listens on this port: a connection error, reported as an attempt records it.
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  const dead = await createEndpoint(server, who, `http://127.0.0.1:${port}/hook`);
  const unreachable = await sendTest(server, who, dead.id);
  t.match(unreachable.body, { delivered: false, responseStatus: null, error: /^network_error: / });

  // A disabled endpoint can be tested (before turning it back on); it still gets no deliveries.
  await server.json(`/v1/webhooks/${endpoint.id}`, {
    method: 'PATCH',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, status: 'disabled' }),
  });
  receiver.behave(() => ({ status: 200 }));
  t.match((await sendTest(server, who, endpoint.id)).body, { delivered: true, responseStatus: 200 }, 'a disabled endpoint is tested too');
});

t.test("a test event does not wait for, overtake in the record, or reorder the endpoint's real deliveries", async (t) => {
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, { clock, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const receiver = await startReceiver(t);
  // Real deliveries are held until released; test events are answered at once.
  receiver.behave((_i, request) => (request.body?.event === 'webhook.test' ? { status: 200 } : { hold: true }));
  const who = await tenant(server);
  const endpoint = await createEndpoint(server, who, receiver.url, ['generation.cancelled']);
  const first = await createGeneration(server, who);
  await cancelGeneration(server, who, first.id);
  await receiver.waitFor(1);
  const second = await createGeneration(server, who);
  await cancelGeneration(server, who, second.id);

  const tested = await sendTest(server, who, endpoint.id);
  t.match(tested.body, { delivered: true, responseStatus: 200 }, 'answered while a real delivery is on the wire');
  t.equal(receiver.held.length, 1, 'the second real delivery still waits behind the first');
  receiver.held[0]!.release(200);
  await receiver.waitFor(3);
  receiver.held[1]!.release(200);
  const history = await historyWhen(server, who, endpoint.id, (d) => d.length === 2 && d.every((x) => x.status === 'delivered'), 'both delivered');
  t.same(
    history.map((d) => d.generationId),
    [second.id, first.id],
    'the history holds the two real deliveries only, newest first',
  );
  const real = receiver.received.filter((r) => r.body.event !== 'webhook.test').map((r) => r.body.data.generationId);
  t.same(real, [first.id, second.id], 'real deliveries arrived in their order');
});

t.test("a standard-scheme endpoint's test event verifies with the standardwebhooks package", async (t) => {
  const server = await sharedTestServer({ ALLOW_PRIVATE_EGRESS: 'true' });
  const receiver = await startReceiver(t);
  const who = await tenant(server);
  const created = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, url: receiver.url, eventTypes: ['generation.completed'], signatureScheme: 'standard' }),
  });
  const tested = await sendTest(server, who, created.body.id);
  t.match(tested.body, { delivered: true });
  const [request] = receiver.received;
  t.equal(request!.headers['webhook-id'], tested.body.id);
  t.match(new Webhook(created.body.secret).verify(request!.rawBody.toString(), request!.headers as Record<string, string>), { event: 'webhook.test' });
});

t.test('the egress guard applies: a private address is refused at connect time and reported', async (t) => {
  const server = await startTestServer(t);
  const receiver = await startReceiver(t);
  const who = await tenant(server);
  // Written as an endpoint made while private egress was allowed, or whose name later resolved inward.
  const id = newId('whk');
  const at = new Date();
  await server.services.db.em().execute(
    `insert into webhook_endpoints (id, workspace_id, url, description, event_types, status, secret_sealed, created_at, updated_at)
     values (?, ?, ?, null, '["generation.completed"]'::jsonb, 'active', ?, ?, ?)`,
    [id, who.workspaceId, receiver.url, server.services.webhookSecrets.seal('whsec_x', id), at, at],
  );
  const tested = await sendTest(server, who, id);
  t.equal(tested.status, 200);
  t.match(tested.body, { delivered: false, responseStatus: null, error: /^blocked_address: / });
  t.equal(receiver.received.length, 0, 'nothing reached the private address');
});

t.test("refused: another workspace's endpoint, a missing one, a deleted one, a key without webhooks.manage", async (t) => {
  const server = await sharedTestServer({ ALLOW_PRIVATE_EGRESS: 'true' });
  const receiver = await startReceiver(t);
  const who = await tenant(server);
  const endpoint = await createEndpoint(server, who, receiver.url);
  const other = await tenant(server);
  const foreign = await server.json(`/v1/webhooks/${endpoint.id}/test?workspaceId=${other.workspaceId}`, { method: 'POST', headers: withKey(other.key) });
  t.equal(foreign.status, 404);
  t.equal(foreign.body.error.code, 'not_found');
  t.equal((await sendTest(server, who, 'whk_00000000000000000000000000')).status, 404);
  const readOnly = await createKey(server, who.cookie, who.workspaceId, ['generations.read']);
  t.equal(
    (await server.json(`/v1/webhooks/${endpoint.id}/test?workspaceId=${who.workspaceId}`, { method: 'POST', headers: withKey(readOnly.key) })).status,
    403,
  );
  const extra = await server.json(`/v1/webhooks/${endpoint.id}/test`, {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, event: 'generation.completed' }),
  });
  t.equal(extra.status, 400, 'no other body fields');
  await server.json(`/v1/webhooks/${endpoint.id}?workspaceId=${who.workspaceId}`, { method: 'DELETE', headers: withKey(who.key) });
  t.equal((await sendTest(server, who, endpoint.id)).status, 404, 'a deleted endpoint');
  t.equal(receiver.received.length, 0, 'no refused request sent anything');
});

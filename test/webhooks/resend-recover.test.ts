import t, { type Test } from 'tap';
import type { TestServer } from '../helpers/server.ts';
import { withKey } from '../helpers/identity.ts';
import { call, isError } from '../identity/support.ts';
import { verifyWebhook } from '../../client/src/webhooks.ts';
import { RECOVER_WINDOW_MS } from '../../actors/webhook/resend-failed.ts';
import { cancelledEvent, createEndpoint, deliveries, historyWhen, startOnManualClock, startReceiver, tenant, type Tenant } from './support.ts';

function setStatus(server: TestServer, who: Tenant, id: string, status: string) {
  return call(server, who.key, 'PATCH', `/v1/webhooks/${id}`, { workspaceId: who.workspaceId, status });
}

/** Three events whose deliveries all end failed: the first attempt is refused, and the endpoint is disabled meanwhile. */
async function threeFailed(t: Test, server: TestServer, who: Tenant, url: string) {
  const endpoint = await createEndpoint(server, who, url);
  const generations = [await cancelledEvent(server, who), await cancelledEvent(server, who), await cancelledEvent(server, who)];
  await historyWhen(server, who, endpoint.id, (d) => d.length === 3 && d[2].attempts.length === 1, 'the head failed once');
  t.equal((await setStatus(server, who, endpoint.id, 'disabled')).status, 200);
  const failed = (await deliveries(server, who, endpoint.id)).data.reverse();
  t.same(
    failed.map((d) => d.status),
    ['failed', 'failed', 'failed'],
  );
  t.equal((await setStatus(server, who, endpoint.id, 'active')).status, 200);
  return { endpoint, generations, failed };
}

t.test('resend: a new delivery linked to the original, with the original body (its id) and a header of its own', async (t) => {
  const { server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  const endpoint = await createEndpoint(server, who, receiver.url);
  await cancelledEvent(server, who);
  const [first] = await receiver.waitFor(1);
  const [delivered] = await historyWhen(server, who, endpoint.id, (d) => d[0]?.status === 'delivered', 'delivered');

  const resent = await call(server, who.key, 'POST', `/v1/webhooks/${endpoint.id}/deliveries/${delivered.id}/resend?workspaceId=${who.workspaceId}`);
  t.equal(resent.status, 201, JSON.stringify(resent.body));
  t.match(resent.body, {
    id: /^dlv_/,
    endpointId: endpoint.id,
    resendOf: delivered.id,
    eventId: delivered.eventId,
    event: 'generation.cancelled',
    status: 'pending',
    attempts: [],
  });
  t.not(resent.body.id, delivered.id);
  t.match(delivered.eventId, /^evt_/, 'a delivery names its event');

  const [, second] = await receiver.waitFor(2);
  t.equal(second!.rawBody.toString(), first!.rawBody.toString(), 'the body is the original, byte for byte');
  t.equal(second!.body.id, delivered.id, 'so its id is the one the receiver deduplicates by');
  t.equal(second!.headers['x-service-delivery'], resent.body.id, 'X-Service-Delivery names the new delivery');
  verifyWebhook(second!.rawBody, second!.headers['x-service-signature'], endpoint.secret, { now: Date.now() });
  const history = await historyWhen(server, who, endpoint.id, (d) => d.length === 2 && d[0].status === 'delivered', 'the resend delivered');
  t.equal(history[0].resendOf, delivered.id);

  // A resend of the resend still carries the first id.
  const again = await call(server, who.key, 'POST', `/v1/webhooks/${endpoint.id}/deliveries/${resent.body.id}/resend?workspaceId=${who.workspaceId}`);
  t.equal(again.status, 201);
  const [, , third] = await receiver.waitFor(3);
  t.equal(third!.body.id, delivered.id);
});

t.test('resend of a failed delivery delivers it; refusals: a disabled endpoint, an unknown or foreign delivery, another workspace', async (t) => {
  const { server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  receiver.behave((i) => ({ status: i === 0 ? 500 : 200 }));
  const { endpoint, failed } = await threeFailed(t, server, who, receiver.url);
  const path = (e: string, d: string, ws = who.workspaceId) => `/v1/webhooks/${e}/deliveries/${d}/resend?workspaceId=${ws}`;

  const resent = await call(server, who.key, 'POST', path(endpoint.id, failed[1].id));
  t.equal(resent.status, 201);
  const got = await receiver.waitFor(2);
  t.equal(got[1]!.body.id, failed[1].id);
  await historyWhen(server, who, endpoint.id, (d) => d[0].id === resent.body.id && d[0].status === 'delivered', 'delivered');
  t.equal((await deliveries(server, who, endpoint.id)).data.find((d) => d.id === failed[1].id).status, 'failed', 'the original keeps its state');

  await setStatus(server, who, endpoint.id, 'disabled');
  isError(t, await call(server, who.key, 'POST', path(endpoint.id, failed[0].id)), 409, 'conflict', /disabled/);
  await setStatus(server, who, endpoint.id, 'active');
  isError(t, await call(server, who.key, 'POST', path(endpoint.id, 'dlv_missing')), 404, 'not_found', 'an unknown delivery');
  const other = await createEndpoint(server, who, receiver.url);
  isError(t, await call(server, who.key, 'POST', path(other.id, failed[0].id)), 404, 'not_found', "another endpoint's delivery");
  const stranger = await tenant(server);
  isError(t, await call(server, stranger.key, 'POST', path(endpoint.id, failed[0].id, stranger.workspaceId)), 404, 'not_found', "another workspace's endpoint");
  isError(
    t,
    await call(server, stranger.key, 'POST', `/v1/webhooks/${endpoint.id}/recover`, {
      workspaceId: stranger.workspaceId,
      since: new Date(Date.now() - 60_000).toISOString(),
    }),
    404,
    'not_found',
    'recover, another workspace',
  );
  const count = await server.services.db
    .em()
    .execute<Array<{ n: number }>>('select count(*)::int as n from webhook_deliveries where endpoint_id = ?', [endpoint.id]);
  t.equal(count[0]!.n, 4, 'no refused request made a delivery');
});

t.test('recover: every failed delivery of the range again, in order; idempotent by key, and never queued twice while pending', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  receiver.behave((i) => ({ status: i === 0 ? 500 : 200 }));
  const since = new Date(clock.now() - 60_000).toISOString();
  const { endpoint, generations, failed } = await threeFailed(t, server, who, receiver.url);
  const recover = (body: object, key?: string) =>
    server.json(`/v1/webhooks/${endpoint.id}/recover`, {
      method: 'POST',
      headers: withKey(who.key, { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) }),
      body: JSON.stringify({ workspaceId: who.workspaceId, ...body }),
    });

  // Held at the receiver, so the recovered deliveries stay pending while the repeats are checked.
  receiver.behave((i) => (i === 1 ? { hold: true } : { status: 200 }));
  const answer = await recover({ since }, 'outage-1');
  t.equal(answer.status, 202, JSON.stringify(answer.body));
  t.match(answer.body, { endpointId: endpoint.id, since, count: 3, firstDeliveryId: /^dlv_/, lastDeliveryId: /^dlv_/, nextSince: null });
  await receiver.waitFor(2);

  const replayed = await recover({ since }, 'outage-1');
  t.equal(replayed.status, 202);
  t.same(replayed.body, answer.body, 'the same key and body: the first answer');
  t.equal(replayed.headers.get('idempotent-replayed'), 'true');
  isError(t, await recover({ since: new Date(clock.now() - 120_000).toISOString() }, 'outage-1'), 409, 'conflict', 'the same key with another body');
  const unkeyed = await recover({ since });
  t.equal(unkeyed.status, 202);
  t.equal(unkeyed.body.count, 0, 'deliveries whose re-send is pending are not queued again');

  receiver.held[0]!.release(200);
  const got = await receiver.waitFor(4);
  t.same(
    got.slice(1).map((r) => r.body.id),
    failed.map((d) => d.id),
    'each body keeps its original id',
  );
  t.same(
    got.slice(1).map((r) => r.body.data.generationId),
    generations,
    'in the order the events happened',
  );
  const history = await historyWhen(
    server,
    who,
    endpoint.id,
    (d) => d.length === 6 && d.slice(0, 3).every((x) => x.status === 'delivered'),
    'all three delivered',
  );
  t.same(
    history
      .slice(0, 3)
      .map((d) => d.resendOf)
      .reverse(),
    failed.map((d) => d.id),
  );
  await server.services.actors.drain();
  t.equal(receiver.received.length, 4, 'nothing was sent twice');

  // A range that ends before the events holds nothing.
  const empty = await recover({ since: new Date(clock.now() - 3_600_000).toISOString(), until: new Date(clock.now() - 3_000_000).toISOString() });
  t.match(empty.body, { count: 0, firstDeliveryId: null });
});

t.test('recover refusals: the range, the key, a disabled endpoint', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  const endpoint = await createEndpoint(server, who, 'http://127.0.0.1:9/hook');
  const now = clock.now();
  const recover = (body: object, headers: Record<string, string> = {}) =>
    server.json(`/v1/webhooks/${endpoint.id}/recover`, {
      method: 'POST',
      headers: withKey(who.key, { 'content-type': 'application/json', ...headers }),
      body: JSON.stringify({ workspaceId: who.workspaceId, ...body }),
    });
  isError(t, await recover({}), 400, 'validation_error', 'since is required');
  isError(t, await recover({ since: 'yesterday' }), 400, 'validation_error', 'since is a date-time');
  isError(t, await recover({ since: new Date(now + 60_000).toISOString() }), 400, 'validation_error', 'since in the future (until is now)');
  isError(
    t,
    await recover({ since: new Date(now - 60_000).toISOString(), until: new Date(now - 120_000).toISOString() }),
    400,
    'validation_error',
    'until before since',
  );
  isError(t, await recover({ since: new Date(now - RECOVER_WINDOW_MS - 60_000).toISOString() }), 400, 'validation_error', 'since beyond the window');
  isError(
    t,
    await recover({ since: new Date(now - 60_000).toISOString(), until: new Date(now + RECOVER_WINDOW_MS).toISOString() }),
    400,
    'validation_error',
    'a range longer than the window',
  );
  isError(
    t,
    await recover({ since: new Date(now - 60_000).toISOString() }, { 'idempotency-key': 'é' }),
    400,
    'validation_error',
    'a key of non-ASCII characters',
  );
  isError(t, await recover({ since: new Date(now - 60_000).toISOString(), extra: 1 }), 400, 'validation_error', 'an unknown field');
  await setStatus(server, who, endpoint.id, 'disabled');
  isError(t, await recover({ since: new Date(now - 60_000).toISOString() }), 409, 'conflict', 'a disabled endpoint');
});

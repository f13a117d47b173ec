import t from 'tap';
import type { TestServer } from '../helpers/server.ts';
import { call } from '../identity/support.ts';
import { cancelledEvent, createEndpoint, deliveries, eventually, historyWhen, startOnManualClock, startReceiver, tenant, type Tenant } from './support.ts';

const DAY = 86_400_000;
const BACKOFF = [30_000, 60_000, 120_000, 240_000];

async function endpointOf(server: TestServer, who: Tenant, id: string): Promise<any> {
  const list = await call(server, who.key, 'GET', `/v1/webhooks?workspaceId=${who.workspaceId}&limit=100`);
  return list.body.data.find((e: any) => e.id === id);
}

t.test(
  'an endpoint failing for 5 days (moved clock) is disabled with a reason; the other subscribed endpoints are told; enabling resumes new deliveries only',
  async (t) => {
    const { clock, server, who } = await startOnManualClock(t);
    const dead = await startReceiver(t);
    dead.behave(() => ({ status: 500 }));
    const watcher = await startReceiver(t);
    const bystander = await startReceiver(t);
    const failing = await createEndpoint(server, who, dead.url, ['generation.cancelled']);
    const _told = await createEndpoint(server, who, watcher.url, ['webhook_endpoint.disabled']);
    await createEndpoint(server, who, bystander.url, ['generation.cancelled']);
    const stranger = await tenant(server);
    const foreign = await startReceiver(t);
    await createEndpoint(server, stranger, foreign.url, ['webhook_endpoint.disabled']);

    await cancelledEvent(server, who);
    await historyWhen(server, who, failing.id, (d) => d[0]?.attempts.length === 1, 'the first attempt failed');
    t.equal((await endpointOf(server, who, failing.id)).status, 'active', 'one failure does not disable');
    // Retries keep failing for four days and more: still active.
    clock.advance(4 * DAY);
    await historyWhen(server, who, failing.id, (d) => d[0]?.attempts.length === 2, 'the second attempt, four days on');
    t.equal((await endpointOf(server, who, failing.id)).status, 'active');
    clock.advance(DAY);
    const disabled = await eventually(async () => {
      const e = await endpointOf(server, who, failing.id);
      return e.status === 'disabled' ? e : undefined;
    }, 'disabled after 5 days of failures');
    t.match(disabled.disabledReason, /^every attempt failed for 5 days, since /);
    const [head] = (await deliveries(server, who, failing.id)).data;
    t.match(head, { status: 'failed', failureReason: 'endpoint_disabled' });
    t.equal(head.attempts.length, 3, 'the attempt that disabled it is on record');

    const [notice] = await watcher.waitFor(1);
    t.equal(notice!.headers['x-service-event'], 'webhook_endpoint.disabled');
    t.match(notice!.body, {
      id: /^dlv_/,
      event: 'webhook_endpoint.disabled',
      data: { endpointId: failing.id, workspaceId: who.workspaceId, url: dead.url, status: 'disabled', reason: disabled.disabledReason },
    });
    const listed = await call(server, who.key, 'GET', `/v1/events?workspaceId=${who.workspaceId}&type=webhook_endpoint.disabled`);
    t.equal(listed.body.data.length, 1, 'the event is kept');
    t.equal(listed.body.data[0].generationId, null);
    await server.services.actors.drain();
    t.equal(bystander.received.length, 1, 'an endpoint not subscribed to it is not told');
    t.equal(foreign.received.length, 0, "another workspace's endpoint is not told");

    // Enabled again: the failed delivery stays failed, the next event goes out.
    dead.behave(() => ({ status: 200 }));
    const enabled = await call(server, who.key, 'PATCH', `/v1/webhooks/${failing.id}`, { workspaceId: who.workspaceId, status: 'active' });
    t.match(enabled.body, { status: 'active', disabledReason: null });
    const next = await cancelledEvent(server, who);
    const got = await dead.waitFor(4);
    t.equal(got[3]!.body.data.generationId, next, 'the new event, not the failed one');
    await historyWhen(server, who, failing.id, (d) => d[0].status === 'delivered' && d[1].status === 'failed', 'history');
    const [row] = await server.services.db
      .em()
      .execute('select failing_since, consecutive_expired, disabled_reason from webhook_endpoints where id = ?', [failing.id]);
    t.same(row, { failing_since: null, consecutive_expired: 0, disabled_reason: null }, 'its health starts afresh');
  },
);

t.test('WEBHOOK_DISABLE_AFTER_EXPIRED: that many expired deliveries in a row disable it; a success in between resets the count', async (t) => {
  const { clock, server, who } = await startOnManualClock(t, { WEBHOOK_DISABLE_AFTER_EXPIRED: '2', WEBHOOK_DISABLE_AFTER_MS: '0' });
  const receiver = await startReceiver(t);
  let failing = true;
  receiver.behave(() => ({ status: failing ? 503 : 200 }));
  const endpoint = await createEndpoint(server, who, receiver.url);
  const expireHead = async (n: number) => {
    for (let a = 1; a <= 4; a++) {
      await historyWhen(server, who, endpoint.id, (d) => d.length === n && d[0].attempts.length === a, `delivery ${n}, attempt ${a}`);
      clock.advance(BACKOFF[a - 1]! * 1.1 + 1);
    }
    await historyWhen(server, who, endpoint.id, (d) => d.length === n && d[0].status === 'expired', `delivery ${n} expired`);
  };
  await cancelledEvent(server, who);
  await expireHead(1);
  failing = false;
  await cancelledEvent(server, who);
  await historyWhen(server, who, endpoint.id, (d) => d[0]?.status === 'delivered', 'one delivered');
  failing = true;
  await cancelledEvent(server, who);
  await expireHead(3);
  t.equal((await endpointOf(server, who, endpoint.id)).status, 'active', 'the success reset the count: one expiry in a row');
  await cancelledEvent(server, who);
  await expireHead(4);
  const disabled = await eventually(async () => {
    const e = await endpointOf(server, who, endpoint.id);
    return e.status === 'disabled' ? e : undefined;
  }, 'disabled after two expiries in a row');
  t.equal(disabled.disabledReason, '2 deliveries in a row expired');
});

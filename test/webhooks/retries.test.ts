import net from 'node:net';
import t, { type Test } from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { newId } from '../../persistence/ids.ts';
import { startTestServer } from '../helpers/server.ts';
import { withKey } from '../helpers/identity.ts';
import { verifyWebhook } from '../../client/src/webhooks.ts';
import { cancelledEvent, createEndpoint, deliveries, historyWhen, startOnManualClock, startReceiver, tenant } from './support.ts';

const BACKOFF = [30_000, 60_000, 120_000, 240_000];
const pendingWith = (n: number) => (data: any[]) => data[0]?.status === 'pending' && data[0].attempts.length === n;

/** The wait before attempt n+1 is the backoff of attempt n, plus at most 10%. */
function checkBackoff(t: Test, delivery: any, n: number): void {
  const wait = Date.parse(delivery.nextAttemptAt) - Date.parse(delivery.attempts[n - 1].at);
  t.ok(wait >= BACKOFF[n - 1]! && wait <= BACKOFF[n - 1]! * 1.1, `attempt ${n + 1} is due ${wait} ms after attempt ${n}`);
}

t.test('a 500 is retried after the backoff; both attempts are recorded and the same delivery is signed afresh', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  receiver.behave((i) => ({ status: i === 0 ? 500 : 204 }));
  const endpoint = await createEndpoint(server, who, receiver.url);
  await cancelledEvent(server, who);

  const [pending] = await historyWhen(server, who, endpoint.id, pendingWith(1), 'the first attempt failed');
  t.match(pending.attempts[0], { attemptNumber: 1, responseStatus: 500, error: 'the endpoint answered 500' });
  checkBackoff(t, pending, 1);

  clock.advance(BACKOFF[0]! * 1.1 + 1);
  const [first, second] = await receiver.waitFor(2);
  t.equal(second!.headers['x-service-delivery'], first!.headers['x-service-delivery'], 'the same delivery again');
  t.equal(second!.rawBody.toString(), first!.rawBody.toString(), 'with the same body');
  t.not(second!.headers['x-service-signature'], first!.headers['x-service-signature'], 'signed at the time of the attempt');
  verifyWebhook(second!.rawBody, second!.headers['x-service-signature'], endpoint.secret, { now: clock.now() });
  const [done] = await historyWhen(server, who, endpoint.id, (d) => d[0]?.status === 'delivered', 'delivered on the second attempt');
  t.match(done.attempts, [
    { attemptNumber: 1, responseStatus: 500 },
    { attemptNumber: 2, responseStatus: 204, error: null },
  ]);
  t.equal(done.nextAttemptAt, null);
});

t.test('a time-out is retried (WEBHOOK_TIMEOUT_MS short here, 10 s by default)', async (t) => {
  const { clock, server, who } = await startOnManualClock(t, { WEBHOOK_TIMEOUT_MS: '200' });
  const receiver = await startReceiver(t);
  receiver.behave((i) => (i === 0 ? { hold: true } : { status: 200 }));
  const endpoint = await createEndpoint(server, who, receiver.url);
  await cancelledEvent(server, who);
  const [pending] = await historyWhen(server, who, endpoint.id, pendingWith(1), 'the first attempt timed out');
  t.match(pending.attempts[0], { attemptNumber: 1, responseStatus: null, error: /^timeout/ });
  checkBackoff(t, pending, 1);
  clock.advance(BACKOFF[0]! * 1.1 + 1);
  await receiver.waitFor(2);
  const [done] = await historyWhen(server, who, endpoint.id, (d) => d[0]?.status === 'delivered', 'delivered on the second attempt');
  t.match(done.attempts[1], { attemptNumber: 2, responseStatus: 200, error: null });
});

t.test('a refused connection is retried, and delivered once the receiver is up', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  // A port nobody listens on (yet).
  const port = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
  const endpoint = await createEndpoint(server, who, `http://127.0.0.1:${port}/hook`);
  await cancelledEvent(server, who);
  const [pending] = await historyWhen(server, who, endpoint.id, pendingWith(1), 'the first attempt found no listener');
  t.match(pending.attempts[0], { attemptNumber: 1, responseStatus: null, error: /network_error/ });
  const receiver = await startReceiver(t, port);
  clock.advance(BACKOFF[0]! * 1.1 + 1);
  await receiver.waitFor(1);
  await historyWhen(server, who, endpoint.id, (d) => d[0]?.status === 'delivered' && d[0].attempts.length === 2, 'delivered on the second attempt');
});

t.test('after five failed attempts a delivery is expired, with every attempt recorded', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  receiver.behave(() => ({ status: 503 }));
  const endpoint = await createEndpoint(server, who, receiver.url);
  await cancelledEvent(server, who);
  for (let n = 1; n <= 4; n++) {
    const [pending] = await historyWhen(server, who, endpoint.id, pendingWith(n), `attempt ${n} failed`);
    checkBackoff(t, pending, n);
    clock.advance(BACKOFF[n - 1]! * 1.1 + 1);
  }
  const [expired] = await historyWhen(server, who, endpoint.id, (d) => d[0]?.status === 'expired', 'expired');
  t.equal(expired.attempts.length, 5);
  t.same(
    expired.attempts.map((a: any) => a.attemptNumber),
    [1, 2, 3, 4, 5],
  );
  t.ok(expired.attempts.every((a: any) => a.responseStatus === 503 && a.error === 'the endpoint answered 503'));
  t.equal(expired.nextAttemptAt, null);
  t.equal(receiver.received.length, 5);
  clock.advance(3_600_000);
  await server.services.actors.drain();
  t.equal(receiver.received.length, 5, 'never a sixth');
});

t.test('deliveries of one endpoint go in creation order, one at a time: a retried head holds back the rest', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  receiver.behave((i) => ({ status: i === 0 ? 500 : 200 }));
  const endpoint = await createEndpoint(server, who, receiver.url);
  const generations: string[] = [];
  for (let i = 0; i < 4; i++) generations.push(await cancelledEvent(server, who));
  await receiver.waitFor(1);
  const waiting = await historyWhen(server, who, endpoint.id, (d) => d.length === 4 && d[3].attempts.length === 1, 'the head failed once');
  t.same(
    waiting.slice(0, 3).map((d) => d.attempts.length),
    [0, 0, 0],
    'the others wait behind the head',
  );
  clock.advance(BACKOFF[0]! * 1.1 + 1);
  const got = await receiver.waitFor(5);
  const ids = [...waiting].reverse().map((d) => d.id);
  t.same(
    got.map((r) => r.headers['x-service-delivery']),
    [ids[0], ...ids],
    'the head twice, then the rest in order',
  );
  t.same(
    got.slice(1).map((r) => r.body.data.generationId),
    generations,
    'in the order the events happened',
  );
  await historyWhen(server, who, endpoint.id, (d) => d.every((x) => x.status === 'delivered'), 'all delivered');
});

t.test('disabling an endpoint fails its pending deliveries and sends nothing more until it is enabled again', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  receiver.behave((i) => ({ status: i === 0 ? 500 : 200 }));
  const endpoint = await createEndpoint(server, who, receiver.url);
  await cancelledEvent(server, who);
  await historyWhen(server, who, endpoint.id, pendingWith(1), 'the first attempt failed');
  const patch = (status: string) =>
    server.json(`/v1/webhooks/${endpoint.id}`, { method: 'PATCH', headers: withKey(who.key), body: JSON.stringify({ workspaceId: who.workspaceId, status }) });
  t.equal((await patch('disabled')).status, 200);
  const [failed] = (await deliveries(server, who, endpoint.id)).data;
  t.match(failed, { status: 'failed', failureReason: 'endpoint_disabled', nextAttemptAt: null });
  t.equal(failed.attempts.length, 1, 'its attempt stays on record');
  clock.advance(3_600_000);
  await cancelledEvent(server, who);
  t.equal((await deliveries(server, who, endpoint.id)).data.length, 1, 'no delivery is made while disabled');

  t.equal((await patch('active')).status, 200);
  const next = await cancelledEvent(server, who);
  const got = await receiver.waitFor(2);
  t.equal(got[1]!.body.data.generationId, next, 'the next request is the new event; the failed one is never sent again');
  await historyWhen(server, who, endpoint.id, (d) => d.length === 2 && d[0].status === 'delivered' && d[1].status === 'failed', 'history');
});

t.test('deleting an endpoint fails its pending deliveries and stops it', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  receiver.behave(() => ({ status: 500 }));
  const endpoint = await createEndpoint(server, who, receiver.url);
  await cancelledEvent(server, who);
  await historyWhen(server, who, endpoint.id, pendingWith(1), 'the first attempt failed');
  const deleted = await server.json(`/v1/webhooks/${endpoint.id}?workspaceId=${who.workspaceId}`, { method: 'DELETE', headers: withKey(who.key) });
  t.equal(deleted.status, 200);
  const rows = await server.services.db
    .em()
    .execute<Array<{ status: string; failure_reason: string; attempt_count: number }>>(
      'select status, failure_reason, attempt_count from webhook_deliveries where endpoint_id = ?',
      [endpoint.id],
    );
  t.same(rows, [{ status: 'failed', failure_reason: 'endpoint_deleted', attempt_count: 1 }]);
  clock.advance(3_600_000);
  await cancelledEvent(server, who);
  await server.services.actors.drain();
  t.equal(receiver.received.length, 1, 'nothing more was sent');
  t.equal((await server.services.db.em().execute('select id from webhook_deliveries where endpoint_id = ?', [endpoint.id])).length, 1, 'and nothing more made');
});

t.test('a URL the egress guard refuses at delivery time fails the delivery without a retry', async (t) => {
  // Private egress is not allowed here; the endpoint's host is taken to have come to point inward after creation.
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, { clock, env: { LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const who = await tenant(server);
  const receiver = await startReceiver(t);
  const id = newId('whk');
  const at = new Date(clock.now());
  await server.services.db.em().execute(
    `insert into webhook_endpoints (id, workspace_id, url, description, event_types, status, secret_sealed, created_at, updated_at)
     values (?, ?, ?, null, '["generation.cancelled"]', 'active', ?, ?, ?)`,
    [id, who.workspaceId, receiver.url, server.services.webhookSecrets.seal('whsec_x', id), at, at],
  );
  await cancelledEvent(server, who);
  const [failed] = await historyWhen(server, who, id, (d) => d[0]?.status === 'failed', 'refused');
  t.match(failed, { failureReason: 'egress_refused', nextAttemptAt: null });
  t.match(failed.attempts, [{ attemptNumber: 1, responseStatus: null, error: /^blocked_address/ }]);
  t.equal(receiver.received.length, 0, 'nothing reached the loopback receiver');
});

t.test('a slow endpoint never delays another', async (t) => {
  const { server, who } = await startOnManualClock(t);
  const slow = await startReceiver(t);
  const fast = await startReceiver(t);
  slow.behave(() => ({ hold: true }));
  const slowEndpoint = await createEndpoint(server, who, slow.url);
  await createEndpoint(server, who, fast.url);
  const first = await cancelledEvent(server, who);
  const second = await cancelledEvent(server, who);
  await slow.waitFor(1);
  const got = await fast.waitFor(2);
  t.same(
    got.map((r) => r.body.data.generationId),
    [first, second],
    'the fast endpoint got both events',
  );
  t.equal(slow.received.length, 1, 'while the slow one still holds the first');
  t.equal(slow.held.length, 1);
  slow.behave(() => ({ status: 200 }));
  slow.held[0]!.release(200);
  const slowGot = await slow.waitFor(2);
  t.equal(slowGot[1]!.body.data.generationId, second, 'then the slow one gets the next, in order');
  await historyWhen(server, who, slowEndpoint.id, (d) => d.length === 2 && d.every((x) => x.status === 'delivered'), 'both delivered');
});

import t, { type Test } from 'tap';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../runtime/clock.ts';
import { newId } from '../../persistence/ids.ts';
import { SecretBox } from '../../persistence/secret-box.ts';
import { WEBHOOK_SECRET_PURPOSE } from '../../actors/webhook/deps.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, withKey } from '../helpers/identity.ts';
import { cancelGeneration, createGeneration, historyWhen, startReceiver, tenant, type Receiver, type Tenant } from './support.ts';

const stripe = new Stripe('sk_test_unused');

/** Jobs stay with the provider for ten minutes of the manual clock, so each event is a cancellation made when the test says. */
async function start(t: Test) {
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, { clock, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  return { clock, server, who: await tenant(server) };
}

async function endpointOf(server: TestServer, who: Tenant, url: string, signatureScheme?: string): Promise<{ id: string; secret: string }> {
  const response = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, url, eventTypes: ['generation.cancelled'], ...(signatureScheme ? { signatureScheme } : {}) }),
  });
  if (response.status !== 201) throw new Error(`endpoint: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body;
}

function rotate(server: TestServer, who: Tenant, id: string, body?: unknown) {
  return server.json(`/v1/webhooks/${id}/rotate-secret?workspaceId=${who.workspaceId}`, {
    method: 'POST',
    headers: withKey(who.key),
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** One cancellation, and the request it makes the receiver get. */
async function nextDelivery(server: TestServer, who: Tenant, receiver: Receiver) {
  const before = receiver.received.length;
  const generation = await createGeneration(server, who);
  await cancelGeneration(server, who, generation.id);
  const received = await receiver.waitFor(before + 1);
  return received[before]!;
}

/** Whether Stripe's own verifier accepts the delivery with this secret, at the service clock's now. */
function stripeAccepts(request: { rawBody: Buffer; headers: Record<string, unknown> }, secret: string, clock: ManualClock): boolean {
  try {
    stripe.webhooks.constructEvent(request.rawBody, String(request.headers['x-service-signature']), secret, 300, undefined, Math.floor(clock.now() / 1000));
    return true;
  } catch {
    return false;
  }
}

t.test("rotation: during the overlap Stripe's verifier accepts each delivery with either secret; after it, only with the new one", async (t) => {
  const { clock, server, who } = await start(t);
  const receiver = await startReceiver(t);
  const endpoint = await endpointOf(server, who, receiver.url);

  const before = await nextDelivery(server, who, receiver);
  t.ok(stripeAccepts(before, endpoint.secret, clock), 'before: the first secret verifies');
  t.match(String(before.headers['x-service-signature']), /^t=\d+,v1=[0-9a-f]{64}$/, 'one signature before any rotation');

  const rotated = await rotate(server, who, endpoint.id);
  t.equal(rotated.status, 200);
  t.equal(rotated.headers.get('cache-control'), 'no-store');
  t.match(rotated.body.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
  t.not(rotated.body.secret, endpoint.secret, 'a new secret');
  t.equal(Date.parse(rotated.body.previousSecretExpiresAt), clock.now() + 24 * 3600_000, 'the default overlap is 24 hours');
  const listed = await server.json(`/v1/webhooks?workspaceId=${who.workspaceId}`, { headers: withKey(who.key) });
  const shown = listed.body.data.find((e: any) => e.id === endpoint.id);
  t.notOk('secret' in shown, 'the list never shows a secret');
  t.equal(shown.previousSecretExpiresAt, rotated.body.previousSecretExpiresAt);
  const stored = await server.services.db
    .em()
    .execute<Array<{ secret_sealed: string; previous_secret_sealed: string }>>(
      'select secret_sealed, previous_secret_sealed from webhook_endpoints where id = ?',
      [endpoint.id],
    );
  t.notOk(
    JSON.stringify(stored).includes(rotated.body.secret.slice(6)) || JSON.stringify(stored).includes(endpoint.secret.slice(6)),
    'neither secret is stored in clear',
  );
  t.match(stored[0]!.previous_secret_sealed, /^v1\./, 'the replaced secret is stored sealed');

  const during = await nextDelivery(server, who, receiver);
  t.match(String(during.headers['x-service-signature']), /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/, 'two v1 entries during the overlap');
  t.ok(stripeAccepts(during, rotated.body.secret, clock), 'during: the new secret verifies');
  t.ok(stripeAccepts(during, endpoint.secret, clock), 'during: the old secret verifies');
  t.notOk(stripeAccepts(during, 'whsec_someone_else', clock), 'during: another secret does not');

  clock.advance(24 * 3600_000 - 60_000);
  const late = await nextDelivery(server, who, receiver);
  t.ok(stripeAccepts(late, endpoint.secret, clock), 'a minute before the overlap ends the old secret still verifies');

  clock.advance(61_000);
  const after = await nextDelivery(server, who, receiver);
  t.match(String(after.headers['x-service-signature']), /^t=\d+,v1=[0-9a-f]{64}$/, 'one signature once the overlap is over');
  t.ok(stripeAccepts(after, rotated.body.secret, clock), 'after: the new secret verifies');
  t.notOk(stripeAccepts(after, endpoint.secret, clock), 'after: the old secret no longer does');
});

t.test('a grace period of 0 ends the old secret at once; a rotation during an overlap keeps only the secret it replaces', async (t) => {
  const { clock, server, who } = await start(t);
  const receiver = await startReceiver(t);
  const endpoint = await endpointOf(server, who, receiver.url);

  const first = await rotate(server, who, endpoint.id, { gracePeriodSeconds: 3600 });
  const second = await rotate(server, who, endpoint.id, { workspaceId: who.workspaceId, gracePeriodSeconds: 600 });
  t.equal(second.status, 200);
  t.equal(Date.parse(second.body.previousSecretExpiresAt), clock.now() + 600_000, 'the overlap asked for');
  const overlap = await nextDelivery(server, who, receiver);
  t.ok(stripeAccepts(overlap, second.body.secret, clock), 'the newest secret verifies');
  t.ok(stripeAccepts(overlap, first.body.secret, clock), 'the secret it replaced verifies');
  t.notOk(stripeAccepts(overlap, endpoint.secret, clock), 'the one before that no longer does');

  const immediate = await rotate(server, who, endpoint.id, { gracePeriodSeconds: 0 });
  t.equal(immediate.status, 200);
  t.equal(immediate.body.previousSecretExpiresAt, null, 'no overlap');
  const now = await nextDelivery(server, who, receiver);
  t.ok(stripeAccepts(now, immediate.body.secret, clock), 'the new secret verifies');
  t.notOk(stripeAccepts(now, second.body.secret, clock), 'the replaced one does not, at once');
});

t.test('Standard Webhooks scheme: the overlap signs with space-separated v1 entries, each verified by the standardwebhooks package', async (t) => {
  const { clock, server, who } = await start(t);
  const receiver = await startReceiver(t);
  const endpoint = await endpointOf(server, who, receiver.url, 'standard');
  t.match(endpoint.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'a whsec_ base64 secret');
  // The package checks the timestamp against the real clock: the overlap here is a minute of the manual clock.
  const rotated = await rotate(server, who, endpoint.id, { gracePeriodSeconds: 60 });
  t.match(rotated.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, "the new secret has the scheme's form");

  const during = await nextDelivery(server, who, receiver);
  t.match(String(during.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/, 'two space-separated v1 entries');
  t.same(new Webhook(rotated.body.secret).verify(during.rawBody.toString(), during.headers as Record<string, string>), during.body, 'the new secret verifies');
  t.same(new Webhook(endpoint.secret).verify(during.rawBody.toString(), during.headers as Record<string, string>), during.body, 'the old secret verifies');

  clock.advance(61_000);
  const after = await nextDelivery(server, who, receiver);
  t.match(String(after.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]{43}=$/, 'one entry after the overlap');
  t.same(new Webhook(rotated.body.secret).verify(after.rawBody.toString(), after.headers as Record<string, string>), after.body, 'the new secret verifies');
  t.throws(() => new Webhook(endpoint.secret).verify(after.rawBody.toString(), after.headers as Record<string, string>), 'the old secret no longer does');
});

t.test("rotation refused: bad grace periods, unknown fields, another workspace's or a missing endpoint, a key without webhooks.manage", async (t) => {
  const { server, who } = await start(t);
  const receiver = await startReceiver(t);
  const endpoint = await endpointOf(server, who, receiver.url);
  for (const [body, what] of [
    [{ gracePeriodSeconds: -1 }, 'negative'],
    [{ gracePeriodSeconds: 7 * 24 * 3600 + 1 }, 'over a week'],
    [{ gracePeriodSeconds: 1.5 }, 'not an integer'],
    [{ gracePeriodSeconds: '60' }, 'a string'],
    [{ graceSeconds: 60 }, 'an unknown field'],
  ] as const) {
    const refused = await rotate(server, who, endpoint.id, body);
    t.equal(refused.status, 400, what);
    t.equal(refused.body.error.code, 'validation_error', what);
  }
  t.equal((await rotate(server, who, endpoint.id, { gracePeriodSeconds: 7 * 24 * 3600 })).status, 200, 'a week is the longest');

  const other = await tenant(server);
  const foreign = await server.json(`/v1/webhooks/${endpoint.id}/rotate-secret?workspaceId=${other.workspaceId}`, {
    method: 'POST',
    headers: withKey(other.key),
  });
  t.equal(foreign.status, 404, "another workspace's endpoint answers as a missing one");
  t.equal(foreign.body.error.code, 'not_found');
  t.equal((await rotate(server, who, 'whk_00000000000000000000000000')).status, 404, 'a missing endpoint');

  const readOnly = await createKey(server, who.cookie, who.workspaceId, ['generations.read']);
  const noScope = await server.json(`/v1/webhooks/${endpoint.id}/rotate-secret?workspaceId=${who.workspaceId}`, {
    method: 'POST',
    headers: withKey(readOnly.key),
  });
  t.equal(noScope.status, 403, 'a key without webhooks.manage');

  // A deleted endpoint cannot be rotated back to life.
  t.equal((await server.json(`/v1/webhooks/${endpoint.id}?workspaceId=${who.workspaceId}`, { method: 'DELETE', headers: withKey(who.key) })).status, 200);
  t.equal((await rotate(server, who, endpoint.id)).status, 404, 'a deleted endpoint');
  const wiped = await server.services.db
    .em()
    .execute<Array<{ previous_secret_sealed: string | null; secret_sealed: string }>>(
      'select secret_sealed, previous_secret_sealed from webhook_endpoints where id = ?',
      [endpoint.id],
    );
  t.same(wiped, [{ secret_sealed: '', previous_secret_sealed: null }], 'deletion wipes both sealed secrets');
});

t.test(
  'an endpoint whose secret cannot be opened (another WEBHOOK_SECRET_KEY): nothing is sent, a test is 409, a rotation lets its deliveries go',
  async (t) => {
    const { clock, server, who } = await start(t);
    const receiver = await startReceiver(t);
    const id = newId('whk');
    const at = new Date(clock.now());
    // Sealed under a key this service does not have.
    const foreignBox = new SecretBox(Buffer.from('z'.repeat(40)), WEBHOOK_SECRET_PURPOSE);
    await server.services.db.em().execute(
      `insert into webhook_endpoints (id, workspace_id, url, description, event_types, status, secret_sealed, created_at, updated_at)
     values (?, ?, ?, null, '["generation.cancelled"]'::jsonb, 'active', ?, ?, ?)`,
      [id, who.workspaceId, receiver.url, foreignBox.seal('whsec_unreachable', id), at, at],
    );
    const generation = await createGeneration(server, who);
    await cancelGeneration(server, who, generation.id);
    await historyWhen(server, who, id, (d) => d.length === 1 && d[0].status === 'pending', 'the delivery waits, pending');
    const test = await server.json(`/v1/webhooks/${id}/test?workspaceId=${who.workspaceId}`, { method: 'POST', headers: withKey(who.key) });
    t.equal(test.status, 409);
    t.equal(test.body.error.code, 'conflict');
    t.equal(receiver.received.length, 0, 'nothing was sent unsigned');

    const rotated = await rotate(server, who, id);
    t.equal(rotated.status, 200);
    const [request] = await receiver.waitFor(1);
    t.ok(stripeAccepts(request!, rotated.body.secret, clock), 'the waiting delivery went out, signed with the new secret');
    t.equal(request!.body.data.generationId, generation.id);
  },
);

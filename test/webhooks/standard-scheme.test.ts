import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer } from '../helpers/server.ts';
import { withKey } from '../helpers/identity.ts';
import { verifyWebhook } from '../../client/src/webhooks.ts';
import { cancelGeneration, createGeneration, historyWhen, startReceiver, tenant } from './support.ts';

const headersOf = (request: { headers: Record<string, unknown> }) => request.headers as Record<string, string>;

t.test(
  'an endpoint created with the standard scheme gets real deliveries the standardwebhooks package verifies, retries keeping their webhook-id',
  async (t) => {
    const clock = new ManualClock(Date.now());
    const server = await startTestServer(t, { clock, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000' } });
    const receiver = await startReceiver(t);
    receiver.behave((i) => ({ status: i === 0 ? 503 : 200 }));
    const who = await tenant(server);
    const created = await server.json('/v1/webhooks', {
      method: 'POST',
      headers: withKey(who.key),
      body: JSON.stringify({ workspaceId: who.workspaceId, url: receiver.url, eventTypes: ['generation.cancelled'], signatureScheme: 'standard' }),
    });
    t.equal(created.status, 201);
    t.equal(created.body.signatureScheme, 'standard');
    t.match(created.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    t.equal(Buffer.from(created.body.secret.slice(6), 'base64').length, 32, 'the secret stands for 32 random bytes');
    const secret = created.body.secret as string;

    const generation = await createGeneration(server, who);
    await cancelGeneration(server, who, generation.id);
    const [first] = await receiver.waitFor(1);
    const h = headersOf(first!);
    t.equal(h['webhook-id'], first!.body.id, "webhook-id is the delivery id, the body's id");
    t.match(h['webhook-timestamp'], /^\d+$/);
    t.match(h['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/);
    t.notOk('x-service-signature' in h, 'no X-Service-Signature under the standard scheme');
    t.equal(h['x-service-event'], 'generation.cancelled', 'the event header is still there');
    t.same(new Webhook(secret).verify(first!.rawBody.toString(), h), first!.body, 'verified by the standardwebhooks package');
    t.throws(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(first!.rawBody.toString(), h), 'another secret is refused');
    t.throws(() => new Webhook(secret).verify(first!.rawBody.toString().replace('cancelled', 'completed'), h), 'a changed body is refused');

    clock.advance(35_000);
    const [, retry] = await receiver.waitFor(2);
    t.equal(headersOf(retry!)['webhook-id'], h['webhook-id'], 'a retry keeps its webhook-id, so receivers deduplicate');
    t.same(new Webhook(secret).verify(retry!.rawBody.toString(), headersOf(retry!)), first!.body, 'the retry verifies too');
    await historyWhen(server, who, created.body.id, (d) => d[0]?.status === 'delivered', 'delivered at the second attempt');
  },
);

t.test('changing the scheme by PATCH issues a secret of the new form, once; the next deliveries use the new scheme only', async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const receiver = await startReceiver(t);
  const who = await tenant(server);
  const created = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, url: receiver.url, eventTypes: ['generation.cancelled'] }),
  });
  t.equal(created.body.signatureScheme, 'x-service', 'x-service is the default');
  const patch = (body: unknown) =>
    server.json(`/v1/webhooks/${created.body.id}`, {
      method: 'PATCH',
      headers: withKey(who.key),
      body: JSON.stringify({ workspaceId: who.workspaceId, ...(body as object) }),
    });

  const same = await patch({ signatureScheme: 'x-service' });
  t.equal(same.status, 200);
  t.notOk('secret' in same.body, 'the same scheme: no new secret');

  const toStandard = await patch({ signatureScheme: 'standard' });
  t.equal(toStandard.status, 200);
  t.equal(toStandard.headers.get('cache-control'), 'no-store');
  t.equal(toStandard.body.signatureScheme, 'standard');
  t.match(toStandard.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  const listed = await server.json(`/v1/webhooks?workspaceId=${who.workspaceId}`, { headers: withKey(who.key) });
  t.notOk('secret' in listed.body.data[0], 'never shown again');

  const generation = await createGeneration(server, who);
  await cancelGeneration(server, who, generation.id);
  const [standard] = await receiver.waitFor(1);
  t.same(new Webhook(toStandard.body.secret).verify(standard!.rawBody.toString(), headersOf(standard!)), standard!.body);
  t.notOk('x-service-signature' in standard!.headers);

  const back = await patch({ signatureScheme: 'x-service' });
  t.match(back.body.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
  const again = await createGeneration(server, who);
  await cancelGeneration(server, who, again.id);
  const [, xService] = await receiver.waitFor(2);
  t.equal(verifyWebhook(xService!.rawBody, xService!.headers['x-service-signature'], back.body.secret).event, 'generation.cancelled');
  t.throws(() => verifyWebhook(xService!.rawBody, xService!.headers['x-service-signature'], created.body.secret), 'the first secret signs nothing any more');
  t.notOk('webhook-signature' in xService!.headers);
});

t.test('an unknown scheme is refused at creation and update', async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true' } });
  const who = await tenant(server);
  const refused = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, url: 'http://127.0.0.1:9/hook', eventTypes: ['generation.completed'], signatureScheme: 'svix' }),
  });
  t.equal(refused.status, 400);
  t.equal(refused.body.error.code, 'validation_error');
  const created = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, url: 'http://127.0.0.1:9/hook', eventTypes: ['generation.completed'] }),
  });
  for (const signatureScheme of ['Standard', '', null, 1]) {
    const patched = await server.json(`/v1/webhooks/${created.body.id}`, {
      method: 'PATCH',
      headers: withKey(who.key),
      body: JSON.stringify({ workspaceId: who.workspaceId, signatureScheme }),
    });
    t.equal(patched.status, 400, `signatureScheme ${JSON.stringify(signatureScheme)}`);
  }
});

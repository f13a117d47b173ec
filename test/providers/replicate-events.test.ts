import t from 'tap';
import { Webhook } from 'standardwebhooks';
import type { InboundEvent } from '../../providers/adapter.ts';
import { eventJobOf } from '../../providers/event-job.ts';
import { verifyStandardWebhook } from '../../providers/replicate/signature.ts';
import { adapterFor, EVENTS_URL, jobFor, png, recorder, SECRET, sleep, startReplicateFake, TOKEN, type ReplicateFake } from '../fakes/replicate.ts';

let fake: ReplicateFake;
t.before(async () => {
  fake = await startReplicateFake({ token: TOKEN, webhookSecret: SECRET });
});
t.teardown(() => fake.close());

const inbound = (delivery: { headers: Record<string, string>; body: Buffer }, now = Date.now()): InboundEvent => ({
  headers: delivery.headers,
  body: delivery.body,
  query: {},
  now,
});

t.test('the signature check', async (t) => {
  t.test("accepts Replicate's client test vector (Standard Webhooks)", async (t) => {
    // replicate-javascript index.test.ts, "Can be used to validate webhook" (from svix-webhooks).
    const verdict = verifyStandardWebhook(
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      {
        'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
        'webhook-timestamp': '1614265330',
        'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
      },
      Buffer.from('{"test": 2432232314}'),
      1614265330 * 1000,
    );
    t.same(verdict, { ok: true, id: 'msg_p5jXN8AQM9LWM0D4loKWxJek' });
  });

  t.test('accepts what standardwebhooks signs, refuses what it would refuse', async (t) => {
    const body = Buffer.from('{"id":"abc","status":"succeeded"}');
    const at = new Date();
    const signature = new Webhook(SECRET).sign('msg_1', at, body.toString());
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature };
    const verify = (h: Record<string, string>, b: Buffer, now = at.getTime()) => verifyStandardWebhook(SECRET, h, b, now);
    const library = (h: Record<string, string>, b: Buffer) => {
      try {
        new Webhook(SECRET).verify(b.toString(), h);
        return true;
      } catch {
        return false;
      }
    };
    t.equal(verify(headers, body).ok, true);
    t.equal(library(headers, body), true, 'the library agrees');

    const tampered = Buffer.from(body.toString().replace('succeeded', 'failed'));
    t.equal(verify(headers, tampered).ok, false, 'a changed body');
    t.equal(library(headers, tampered), false);
    t.equal(verify({ ...headers, 'webhook-id': 'msg_2' }, body).ok, false, 'another id');
    t.equal(verify({ ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 1) }, body).ok, false, 'another timestamp');
    t.equal(verify(headers, body, at.getTime() + 5 * 60_000 + 2_000).ok, false, 'older than five minutes');
    t.equal(verify(headers, body, at.getTime() - 5 * 60_000 - 2_000).ok, false, 'more than five minutes ahead');
    t.equal(verify(headers, body, at.getTime() + 4 * 60_000).ok, true, 'within five minutes');
    const other = new Webhook(`whsec_${Buffer.from('another key of thirty-two bytes!').toString('base64')}`).sign('msg_1', at, body.toString());
    t.equal(verify({ ...headers, 'webhook-signature': other }, body).ok, false, 'signed with another secret');
    t.equal(verify({ ...headers, 'webhook-signature': `${other} ${signature}` }, body).ok, true, 'one of several signatures matches');
    t.equal(verify({ ...headers, 'webhook-signature': signature.replace('v1,', 'v2,') }, body).ok, false, 'an unknown version');
    t.equal(verify({ ...headers, 'webhook-signature': 'v1,' }, body).ok, false, 'an empty signature');
    const { 'webhook-signature': _, ...unsigned } = headers;
    t.equal(verify(unsigned, body).ok, false, 'no signature');
  });
});

t.test('verifyEvent', async (t) => {
  fake.scenario('model:acme/events', { advance: 'manual', end: { status: 'succeeded', output: 'x' } });
  const adapter = adapterFor(fake, { model: 'acme/events' }, { eventsUrl: EVENTS_URL, pollIntervalMs: 10_000 }, { webhookSecret: SECRET });
  const { providerJobId } = await adapter.submit(jobFor(), () => undefined);

  t.test('a delivery as Replicate signs it: the prediction, its id and the webhook-id', async (t) => {
    const delivery = fake.webhook(providerJobId, { msgId: 'msg_abc' });
    const verified = adapter.verifyEvent!(inbound(delivery));
    t.same(verified.ok && { providerJobId: verified.providerJobId, eventId: verified.eventId }, { providerJobId, eventId: 'msg_abc' });
    t.equal(verified.ok && (verified.payload as { id: string }).id, providerJobId);
  });

  t.test('refused: a bad signature, another secret, a stale timestamp, a body that is not a prediction', async (t) => {
    const delivery = fake.webhook(providerJobId);
    const tampered = { ...delivery, body: Buffer.from(delivery.body.toString().replace('"starting"', '"succeeded"')) };
    t.equal(adapter.verifyEvent!(inbound(tampered)).ok, false);
    const foreign = fake.webhook(providerJobId, { secret: `whsec_${Buffer.from('not the secret we were given....').toString('base64')}` });
    t.equal(adapter.verifyEvent!(inbound(foreign)).ok, false);
    const stale = fake.webhook(providerJobId, { at: new Date(Date.now() - 10 * 60_000) });
    t.equal(adapter.verifyEvent!(inbound(stale)).ok, false);
    const notPrediction = { headers: {}, body: Buffer.from('[]') };
    const at = new Date();
    notPrediction.headers = {
      'webhook-id': 'msg_x',
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(SECRET).sign('msg_x', at, '[]'),
    };
    t.equal(adapter.verifyEvent!(inbound(notPrediction as never)).ok, false);
  });

  t.test('without a webhook secret every event is refused', async (t) => {
    const unsigned = adapterFor(fake, { model: 'acme/events' });
    const verified = unsigned.verifyEvent!(inbound(fake.webhook(providerJobId)));
    t.equal(verified.ok, false);
    await unsigned.close();
  });

  t.teardown(() => adapter.close());
});

t.test('following by events', async (t) => {
  t.test("the create asks for start and completed webhooks at our events URL, with the job's own id and token", async (t) => {
    fake.scenario('model:acme/hooked', { end: { status: 'succeeded', output: 'x' } });
    const adapter = adapterFor(fake, { model: 'acme/hooked' }, { eventsUrl: EVENTS_URL }, { webhookSecret: SECRET });
    const job = jobFor({ mode: 'text_to_text' });
    const { providerJobId } = await adapter.submit(job, () => undefined);
    const create = fake.creates.find((c) => c.predictionId === providerJobId)!;
    const hook = new URL(String(create.body.webhook));
    t.equal(`${hook.origin}${hook.pathname}`, EVENTS_URL);
    t.equal(hook.searchParams.get('job'), job.generationId);
    t.equal(eventJobOf(Object.fromEntries(hook.searchParams), 'replicate-job-token', SECRET), job.generationId, 'its token checks');
    // An event posted to that URL names the job; one with a forged token is refused.
    const delivery = fake.webhook(providerJobId);
    const event = (query: Record<string, string>): InboundEvent => ({ headers: delivery.headers, body: delivery.body, query, now: Date.now() });
    t.match(adapter.verifyEvent!(event(Object.fromEntries(hook.searchParams))), { ok: true, providerJobId, jobId: job.generationId });
    t.match(adapter.verifyEvent!(event({ job: job.generationId, token: 'f'.repeat(64) })), { ok: false, message: /job token is wrong/ });
    t.match(adapter.verifyEvent!(event({})), { ok: true, providerJobId }, 'an event without a job in its query is about its prediction alone');
    t.same(create.body.webhook_events_filter, ['start', 'completed']);
    await adapter.close();
  });

  t.test('no webhook is asked for without a secret, or with an events URL that is not HTTPS', async (t) => {
    fake.scenario('model:acme/unhooked', { end: { status: 'succeeded', output: 'x' } });
    const noSecret = adapterFor(fake, { model: 'acme/unhooked' }, { eventsUrl: EVENTS_URL });
    const plainHttp = adapterFor(fake, { model: 'acme/unhooked' }, { eventsUrl: 'http://localhost:3000/v1/providers/r/events' }, { webhookSecret: SECRET });
    for (const adapter of [noSecret, plainHttp]) {
      const rec = recorder();
      const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
      const create = fake.creates.find((c) => c.predictionId === providerJobId)!;
      t.equal(create.body.webhook, undefined);
      t.equal(create.body.webhook_events_filter, undefined);
      t.equal((await rec.ended).type, 'succeeded', 'followed by polling');
      await adapter.close();
    }
  });

  t.test('events alone carry the job to its end, with no poll', async (t) => {
    const url = fake.file('evented.png', png(12, 12));
    fake.scenario('model:acme/evented', { advance: 'manual', end: { status: 'succeeded', output: [url] } });
    const adapter = adapterFor(fake, { model: 'acme/evented' }, { eventsUrl: EVENTS_URL, pollIntervalMs: 10_000 }, { webhookSecret: SECRET });
    const rec = recorder();
    const gets = fake.counts.get;
    const { providerJobId } = await adapter.submit(jobFor(), rec.report);
    const deliver = () => {
      const verified = adapter.verifyEvent!(inbound(fake.webhook(providerJobId)));
      if (!verified.ok) throw new Error(verified.message);
      adapter.deliverEvent!(verified.providerJobId, verified.payload);
    };
    fake.advance(providerJobId);
    deliver();
    await sleep(10);
    t.same(
      rec.updates.map((u) => u.type),
      ['running'],
    );
    fake.advance(providerJobId);
    deliver();
    const end = await rec.ended;
    t.equal(end.type, 'succeeded');
    t.equal(fake.counts.get, gets, 'no GET was needed');
    await adapter.close();
  });

  t.test('completed before start, and the same event twice: one outcome', async (t) => {
    const url = fake.file('ordered.png', png(6, 6));
    fake.scenario('model:acme/unordered', { advance: 'manual', end: { status: 'succeeded', output: [url] } });
    const adapter = adapterFor(fake, { model: 'acme/unordered' }, { eventsUrl: EVENTS_URL, pollIntervalMs: 10_000 }, { webhookSecret: SECRET });
    const rec = recorder();
    const { providerJobId } = await adapter.submit(jobFor(), rec.report);
    fake.advance(providerJobId);
    const start = fake.webhook(providerJobId, { msgId: 'msg_start' });
    fake.advance(providerJobId);
    const completed = fake.webhook(providerJobId, { msgId: 'msg_completed' });
    for (const delivery of [completed, completed, start, completed]) {
      const verified = adapter.verifyEvent!(inbound(delivery));
      if (verified.ok) adapter.deliverEvent!(verified.providerJobId, verified.payload);
    }
    t.equal((await rec.ended).type, 'succeeded');
    await sleep(50);
    t.equal(rec.terminals().length, 1, 'one terminal update');
    t.equal(rec.updates.filter((u) => u.type === 'running').length, 0, 'a late start does not bring the job back');
    await adapter.close();
  });

  t.test('a failed event after success, or a success after failure, changes nothing', async (t) => {
    fake.scenario('model:acme/late', { advance: 'manual', end: { status: 'failed', error: 'boom' } });
    const adapter = adapterFor(fake, { model: 'acme/late' }, { eventsUrl: EVENTS_URL, pollIntervalMs: 10_000 }, { webhookSecret: SECRET });
    const rec = recorder();
    const { providerJobId } = await adapter.submit(jobFor(), rec.report);
    fake.advance(providerJobId);
    fake.advance(providerJobId);
    const failedEvent = JSON.parse(fake.webhook(providerJobId).body.toString());
    adapter.deliverEvent!(providerJobId, failedEvent);
    adapter.deliverEvent!(providerJobId, { ...failedEvent, status: 'succeeded', error: null, output: 'x' });
    t.equal((await rec.ended).type, 'failed');
    await sleep(30);
    t.equal(rec.terminals().length, 1);
    await adapter.close();
  });

  t.test('an event for a prediction this adapter does not follow is ignored', async (t) => {
    const adapter = adapterFor(fake, { model: 'acme/late' }, { eventsUrl: EVENTS_URL }, { webhookSecret: SECRET });
    adapter.deliverEvent!('unknownprediction', { id: 'unknownprediction', status: 'succeeded', output: 'x' });
    t.pass('nothing thrown');
    await adapter.close();
  });

  t.test('the polling backstop: no event arrives, polls carry the job to its end', async (t) => {
    const url = fake.file('polled.png', png(6, 6));
    fake.scenario('model:acme/silent', { startingPolls: 2, processingPolls: 2, end: { status: 'succeeded', output: [url] } });
    const adapter = adapterFor(fake, { model: 'acme/silent' }, { eventsUrl: EVENTS_URL, pollIntervalMs: 20 }, { webhookSecret: SECRET });
    const rec = recorder();
    const gets = fake.counts.get;
    await adapter.submit(jobFor(), rec.report);
    t.equal((await rec.ended).type, 'succeeded');
    t.ok(fake.counts.get - gets >= 4, 'by GET /v1/predictions/{id}');
    await adapter.close();
  });
});

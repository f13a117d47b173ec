// fal's webhooks: signed by the fake with an Ed25519 key made here, whose public half is the JWKS in the
// settings; posted to a small events route standing in for the service's (verify on any node, de-duplicate
// by event id, deliver to the adapter that follows the job).
import t from 'tap';
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { encodePng } from '../../providers/local/png.ts';
import { imageDimensions } from '../../providers/local/sniff.ts';
import { createFalAdapter } from '../../providers/fal/adapter.ts';
import { falJobOf } from '../../providers/fal/job-token.ts';
import { parseFalSettings } from '../../providers/fal/settings.ts';
import type { AdapterJob, AdapterUpdate, InboundEvent, ProviderAdapter } from '../../providers/adapter.ts';
import { guardedFetcher } from '../../runtime/egress.ts';
import { startFakeFal } from '../fakes/fal.ts';
import { recorder } from '../helpers/updates.ts';

const KEY = 'fake-key-id-0002:fake-key-secret-0123456789abcdef';
const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519');
const JWKS = JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'fake-fal-1', use: 'sig', alg: 'EdDSA' }] });
const OUTPUT = await encodePng(24, 16, new Uint8Array(24 * 16 * 3).fill(200));
let served = 0;

const fake = await startFakeFal({
  key: KEY,
  signingKey: privateKey,
  endpoints: {
    'fal-ai/flux/schnell': {
      required: ['prompt'],
      result: (_input, f) => ({ images: [{ url: f.host(`schnell-${++served}.png`, OUTPUT), width: 24, height: 16 }] }),
    },
  },
});
t.teardown(() => fake.close());

/** The service's events route, reduced: verify, drop a repeated event id, deliver. */
const route = { adapter: undefined as ProviderAdapter | undefined, seen: new Set<string>(), answers: [] as number[], duplicates: 0 };
const events = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers[name.toLowerCase()] = value;
    const verdict = route.adapter!.verifyEvent!({ headers, body: Buffer.concat(chunks), query: {}, now: Date.now() });
    if (!verdict.ok) {
      route.answers.push(401);
      res.writeHead(401).end(verdict.message);
      return;
    }
    if (route.seen.has(verdict.eventId)) route.duplicates += 1;
    else {
      route.seen.add(verdict.eventId);
      route.adapter!.deliverEvent!(verdict.providerJobId, verdict.payload);
    }
    route.answers.push(200);
    res.writeHead(200).end();
  });
});
await new Promise<void>((resolve) => events.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => events.close(() => resolve())));
const EVENTS_URL = `http://127.0.0.1:${(events.address() as AddressInfo).port}/v1/providers/fal-schnell/events`;

const adapters: ProviderAdapter[] = [];
t.teardown(() => Promise.all(adapters.map((a) => a.close())));

function adapterFor(options: { jwks?: string | undefined; pollIntervalMs?: number } = {}): ProviderAdapter {
  const { settings, problems } = parseFalSettings({ FAL_KEY: KEY, FAL_QUEUE_URL: fake.url, FAL_WEBHOOK_JWKS: 'jwks' in options ? options.jwks : JWKS });
  if (!settings) throw new Error(problems.join('; '));
  const adapter = createFalAdapter(
    settings,
    { id: 'fal-schnell', target: { endpoint: 'fal-ai/flux/schnell' } },
    {
      fetchOutput: guardedFetcher({ allowAddress: (a) => a === '127.0.0.1', maxBytes: 1 << 20, timeoutMs: 2_000 }),
      eventsUrl: EVENTS_URL,
      maxResponseBytes: 1 << 20,
      maxOutputBytes: 1 << 20,
      // Long by default: the webhook, not a poll, ends these jobs.
      pollIntervalMs: options.pollIntervalMs ?? 60_000,
      requestTimeoutMs: 500,
      now: Date.now,
    },
  );
  adapters.push(adapter);
  route.adapter = adapter;
  return adapter;
}

const jobOf = (input: Record<string, unknown>): AdapterJob => ({
  generationId: 'gen-events',
  mode: 'text_to_image',
  modelId: 'fal/schnell',
  params: {},
  input,
  inputs: { images: [], videos: [] },
  deadline: Date.now() + 15_000,
});

const requestIdOf = (providerJobId: string) => providerJobId.slice(providerJobId.lastIndexOf(':') + 1);
const terminal = (updates: AdapterUpdate[]) => updates.filter((u) => u.type === 'succeeded' || u.type === 'failed');
const eventOf = (delivery: { headers: Record<string, string>; body: Buffer }, now = Date.now()): InboundEvent => ({
  headers: { ...delivery.headers },
  body: delivery.body,
  query: {},
  now,
});

/** Submits a job fal holds in its queue until the test moves it. */
async function heldJob(adapter: ProviderAdapter, input: Record<string, unknown> = { prompt: 'a fox' }) {
  const job = recorder();
  fake.script({ hold: true });
  const { providerJobId } = await adapter.submit(jobOf(input), job.report);
  return { job, providerJobId, id: requestIdOf(providerJobId) };
}

t.test('the OK webhook ends the job with its payload: verified, its files fetched, the result URL never read', async (t) => {
  const adapter = adapterFor();
  const { job, providerJobId, id } = await heldJob(adapter);
  const asked = new URL(fake.requests.get(id)!.webhook!);
  t.equal(`${asked.origin}${asked.pathname}`, EVENTS_URL, 'submitted with ?fal_webhook=<eventsUrl>');
  t.match(falJobOf(Object.fromEntries(asked.searchParams), KEY), /^gen_|^[A-Za-z0-9_-]+$/, "the job's own id in its query, with a token that checks");
  t.equal(falJobOf({ ...Object.fromEntries(asked.searchParams), token: 'f'.repeat(64) }, KEY), 'wrong', 'a forged token does not');
  await fake.advance(id, 'COMPLETED');
  const end = await job.ended;
  t.match(end, { type: 'succeeded' });
  if (end.type === 'succeeded') t.same(imageDimensions(end.files[0]!.bytes), { width: 24, height: 16 });
  t.same(
    fake.webhooks.filter((w) => w.id === id),
    [{ id, status: 200 }],
  );
  t.notOk(fake.calls.includes(`GET /fal-ai/flux/requests/${id}`), 'the payload came with the webhook');
  t.same(
    job.updates.map((u) => u.type),
    ['running', 'succeeded'],
    'running first, since no poll saw IN_PROGRESS',
  );
  const verdict = adapter.verifyEvent!(eventOf(fake.delivery(id)));
  t.same(verdict.ok && [verdict.providerJobId, verdict.eventId], [providerJobId, `${id}:OK`], 'its job and event ids');
});

t.test("an ERROR webhook fails the job with fal's words: 422 is the input", async (t) => {
  const adapter = adapterFor();
  const { job, id } = await heldJob(adapter, { image_size: 'square' }); // no prompt
  await fake.advance(id, 'COMPLETED');
  const end = await job.ended;
  t.match(end, { type: 'failed', errorCode: 'provider_input_rejected' });
  if (end.type === 'failed') t.match(end.errorMessage, /Invalid status code: 422.*prompt: Field required/);
  t.match(adapter.verifyEvent!(eventOf(fake.delivery(id))), { ok: true, eventId: `${id}:ERROR` });
});

t.test('an ERROR webhook of the content checker is provider_content_policy', async (t) => {
  const adapter = adapterFor();
  fake.script({
    hold: true,
    outcome: {
      status: 422,
      body: {
        detail: [{ loc: ['body', 'prompt'], msg: 'The content was flagged by a content checker.', type: 'content_policy_violation', categories: ['violence'] }],
      },
    },
  });
  const job = recorder();
  const { providerJobId } = await adapter.submit(jobOf({ prompt: 'something flagged' }), job.report);
  await fake.advance(requestIdOf(providerJobId), 'COMPLETED');
  const end = await job.ended;
  t.match(end, { type: 'failed', errorCode: 'provider_content_policy' });
  if (end.type === 'failed') t.match(end.errorMessage, /flagged by a content checker/);
});

t.test('refused: a changed body, another key, an old or future timestamp, a missing header; none of them ends the job', async (t) => {
  const adapter = adapterFor();
  const { job, id } = await heldJob(adapter);
  fake.sendWebhooks = false;
  await fake.advance(id, 'COMPLETED');
  fake.sendWebhooks = true;
  const genuine = fake.delivery(id);

  const changed = { ...genuine, body: Buffer.from(genuine.body.toString().replace('"OK"', '"ERROR"')) };
  const reSigned = (() => {
    const forger = fake.delivery(id);
    const digest = createHash('sha256').update(forger.body).digest('hex');
    const h = forger.headers;
    const message = `${h['x-fal-webhook-request-id']}\n${h['x-fal-webhook-user-id']}\n${h['x-fal-webhook-timestamp']}\n${digest}`;
    return { body: forger.body, headers: { ...h, 'x-fal-webhook-signature': sign(null, Buffer.from(message), other.privateKey).toString('hex') } };
  })();
  const stale = fake.delivery(id, Date.now() - 6 * 60_000);
  const future = fake.delivery(id, Date.now() + 6 * 60_000);
  const { 'x-fal-webhook-user-id': _dropped, ...withoutUser } = genuine.headers;

  const cases: Array<[string, InboundEvent, RegExp]> = [
    ['a changed body', eventOf(changed), /does not match/],
    ['a signature of another key', eventOf(reSigned), /does not match/],
    ['a timestamp 6 minutes old', eventOf(stale), /300 s/],
    ['a timestamp 6 minutes ahead', eventOf(future), /300 s/],
    ['no user id header', eventOf({ headers: withoutUser, body: genuine.body }), /missing/],
    ['a signature that is not hex', eventOf({ ...genuine, headers: { ...genuine.headers, 'x-fal-webhook-signature': 'zz'.repeat(64) } }), /hex/],
  ];
  for (const [name, event, why] of cases) {
    const verdict = adapter.verifyEvent!(event);
    t.equal(verdict.ok, false, `${name} is refused`);
    if (!verdict.ok) t.match(verdict.message, why);
  }
  t.same(terminal(job.updates), [], 'nothing ended the job');

  // Posted to the route, a forgery is answered 401; the genuine delivery then ends the job once.
  const post = (d: { headers: Record<string, string>; body: Buffer }) => fetch(EVENTS_URL, { method: 'POST', headers: d.headers, body: d.body });
  t.equal((await post(changed)).status, 401);
  t.equal((await post(genuine)).status, 200);
  t.match(await job.ended, { type: 'succeeded' });
});

t.test('a replayed event and events out of order leave one outcome', async (t) => {
  const adapter = adapterFor();
  const { job, providerJobId, id } = await heldJob(adapter);
  await fake.advance(id, 'COMPLETED');
  await job.ended;
  const duplicates = route.duplicates;
  const again = fake.delivery(id);
  t.equal((await fetch(EVENTS_URL, { method: 'POST', headers: again.headers, body: again.body })).status, 200, 'a redelivery is acknowledged');
  t.equal(route.duplicates, duplicates + 1, 'and recognised by its event id');

  // Past the route's de-duplication (another node, a lost memory), the adapter still ends a job once.
  const ok = JSON.parse(again.body.toString());
  adapter.deliverEvent!(providerJobId, ok);
  adapter.deliverEvent!(providerJobId, { request_id: id, status: 'ERROR', error: 'Invalid status code: 500', payload: { detail: 'late' } });
  await new Promise((r) => setTimeout(r, 50));
  t.equal(terminal(job.updates).length, 1, 'one terminal update');
  t.same(
    job.updates.map((u) => u.type),
    ['running', 'succeeded'],
    'nothing after it',
  );
});

t.test('an ERROR delivered before the OK ends the job failed, and the OK after it is ignored', async (t) => {
  const adapter = adapterFor();
  const { job, providerJobId, id } = await heldJob(adapter);
  adapter.deliverEvent!(providerJobId, {
    request_id: id,
    status: 'ERROR',
    error: 'Invalid status code: 503',
    payload: { detail: 'Runner disconnected', error_type: 'runner_disconnected' },
  });
  await fake.advance(id, 'COMPLETED');
  const end = await job.ended;
  t.match(end, { type: 'failed', errorCode: 'provider_unavailable' });
  if (end.type === 'failed') t.match(end.errorMessage, /Runner disconnected \(runner_disconnected\)/);
  await new Promise((r) => setTimeout(r, 50));
  t.equal(terminal(job.updates).length, 1);
});

t.test('an OK webhook without its payload (payload_error) reads the result URL', async (t) => {
  const adapter = adapterFor();
  const { job, providerJobId, id } = await heldJob(adapter);
  fake.sendWebhooks = false;
  await fake.advance(id, 'COMPLETED');
  fake.sendWebhooks = true;
  adapter.deliverEvent!(providerJobId, { request_id: id, status: 'OK', payload: null, payload_error: 'Response payload is not JSON serializable' });
  t.match(await job.ended, { type: 'succeeded' });
  t.ok(fake.calls.includes(`GET /fal-ai/flux/requests/${id}`), 'the result URL was read');
});

t.test('the polling backstop ends a job whose webhook never came', async (t) => {
  const adapter = adapterFor({ pollIntervalMs: 20 });
  fake.sendWebhooks = false;
  t.teardown(() => {
    fake.sendWebhooks = true;
  });
  const job = recorder();
  const { providerJobId } = await adapter.submit(jobOf({ prompt: 'no webhook' }), job.report);
  t.match(await job.ended, { type: 'succeeded' });
  t.same(
    fake.webhooks.filter((w) => w.id === requestIdOf(providerJobId)),
    [],
    'no webhook was sent',
  );
});

t.test('without FAL_WEBHOOK_JWKS no webhook is asked for and every event is refused', async (t) => {
  const adapter = adapterFor({ jwks: undefined, pollIntervalMs: 20 });
  const job = recorder();
  const { providerJobId } = await adapter.submit(jobOf({ prompt: 'polling only' }), job.report);
  const id = requestIdOf(providerJobId);
  t.equal(fake.requests.get(id)!.webhook, undefined);
  t.ok(fake.calls.includes('POST /fal-ai/flux/schnell'));
  await job.ended;
  const verdict = adapter.verifyEvent!(eventOf(fake.delivery(id)));
  t.match(verdict, { ok: false, message: /FAL_WEBHOOK_JWKS/ });
});

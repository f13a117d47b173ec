import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { downloadAsset, STARTING_CREDITS, writeTestCatalog } from '../helpers/provider-service.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { png, SECRET, startReplicateFake, TOKEN, VERSION, type Scenario } from '../fakes/replicate.ts';
import { createGeneration, getGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from '../generations/flow.ts';

/**
 * The Replicate adapter through the public API, followed by its webhooks: the service's public URL is HTTPS,
 * so each prediction asks for `start` and `completed` events; the fake moves predictions only when told
 * (`advance`), and the test delivers its signed webhooks to POST /v1/providers/{deployment}/events. The
 * backstop poll is a minute away, so whatever settles a job here is an event.
 */
const fake = await startReplicateFake({ token: TOKEN, webhookSecret: SECRET });
t.teardown(() => fake.close());
const DEPLOYMENT = 'painter-replicate';
const EVENTS = `/v1/providers/${DEPLOYMENT}/events`;

const catalogFile = writeTestCatalog(t, [
  {
    id: 'acme/painter',
    mode: 'text_to_image',
    price: { per: 'image', credits: 7 },
    parameters: { prompt: { required: true }, aspectRatio: {} },
    deployments: [
      {
        id: DEPLOYMENT,
        provider: 'replicate',
        target: { version: VERSION },
        input: { aspectRatio: { width: 'width', height: 'height', longSide: 512 } },
      },
    ],
  },
]);

const server = await startTestServer(t, {
  env: {
    // A public HTTPS address (Replicate sends webhooks only there); the test calls the service on loopback.
    BASE_URL: 'https://gen.example.com',
    CATALOG_FILE: catalogFile,
    ALLOW_PRIVATE_EGRESS: 'true',
    REPLICATE_API_TOKEN: TOKEN,
    REPLICATE_BASE_URL: fake.baseUrl,
    REPLICATE_WEBHOOK_SECRET: SECRET,
    PROVIDER_POLL_MS: '60000',
    PROVIDER_REQUEST_TIMEOUT_MS: '5000',
  },
});
const query = serverQuery(server);

const succeeding = (logs: string[] = []): Scenario => ({
  advance: 'manual',
  logs,
  end: { status: 'succeeded', output: [fake.file('out.png', png(32, 16))] },
});

async function workspace() {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
  /** Creates a job on the scenario and answers it with its prediction id, once the service has written it. */
  const create = async (prompt: string, scenario: Scenario) => {
    fake.scenario(`version:${VERSION}`, scenario);
    const created = await createGeneration(server, key, user.workspaceId, {
      mode: 'text_to_image',
      model: 'acme/painter',
      params: { prompt, aspectRatio: '16:9' },
    });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
    await waitFor(server, key, user.workspaceId, created.body.id, (g) => g.status === 'submitted', 'submitted');
    const prediction = fake.creates.find((c) => (c.body.input as { prompt?: string }).prompt === prompt)!.predictionId;
    return { id: created.body.id, prediction };
  };
  const get = (id: string) => getGeneration(server, key, user.workspaceId, id);
  const until = (id: string, done: Parameters<typeof waitFor>[4], what: string) => waitFor(server, key, user.workspaceId, id, done, what);
  return { workspaceId: user.workspaceId, key, create, get, until };
}

/** Delivers a webhook (as the fake signed it) to the events route. */
async function deliver(delivery: { headers: Record<string, string>; body: Buffer }) {
  const response = await server.fetch(EVENTS, { method: 'POST', headers: delivery.headers, body: delivery.body });
  return { status: response.status, body: (await response.json()) as { received?: true; applied?: boolean; error?: { code: string; message: string } } };
}

t.test(
  'webhooks drive a prediction: start makes the job running, completed settles it without a poll, its logs are notes; redeliveries are applied once',
  async (t) => {
    const ws = await workspace();
    const { id, prediction } = await ws.create('a lighthouse at dawn', succeeding(['loading weights', `authenticating with ${TOKEN}`, 'denoising 20/20']));
    const create = fake.creates.find((c) => c.predictionId === prediction)!;
    t.match(
      create.body,
      {
        version: VERSION,
        input: { prompt: 'a lighthouse at dawn', width: 512, height: 288 },
        webhook: `https://gen.example.com${EVENTS}`,
        webhook_events_filter: ['start', 'completed'],
      },
      "the create asks for the start and completed events at the deployment's events URL",
    );

    fake.advance(prediction);
    const start = fake.webhook(prediction);
    t.same(await deliver(start), { status: 200, body: { received: true, applied: true } }, 'start: applied');
    await ws.until(id, (g) => g.status === 'running', 'running');
    t.same(await deliver(start), { status: 200, body: { received: true, applied: false } }, 'the same start again: acknowledged, not applied');

    fake.advance(prediction);
    const completed = fake.webhook(prediction);
    t.same(await deliver(completed), { status: 200, body: { received: true, applied: true } }, 'completed: applied');
    const done = await ws.until(id, isTerminal, 'a terminal state');
    t.equal(done.status, 'succeeded', JSON.stringify(done));
    t.equal(fake.counts.get, 0, 'no prediction was polled: the events settled it');
    t.same(
      done.timeline.map((e) => e.status),
      ['queued', 'reserved', 'submitted', 'running', 'running', 'succeeded'],
    );
    const note = done.timeline.find((e) => e.detail !== undefined)!;
    t.equal(note.detail, 'loading weights\nauthenticating with [redacted]\ndenoising 20/20', 'the log lines are a note, the token redacted');

    const bytes = await downloadAsset(server, ws.key, ws.workspaceId, done.outputAssetIds[0]!);
    t.equal(sniffContentType(bytes), 'image/png');
    t.same(imageDimensions(bytes), { width: 32, height: 16 });

    t.same(await deliver(completed), { status: 200, body: { received: true, applied: false } }, 'the same completed again: acknowledged, not applied');
    t.same((await ledgerByGeneration(query, ws.workspaceId))[id], { reserve: 1, capture: 1 }, 'captured once');
    t.same(await moneyOf(query, ws.workspaceId), {
      available: STARTING_CREDITS - 7,
      reserved: 0,
      ledgerAvailable: STARTING_CREDITS - 7,
      ledgerReserved: 0,
      reservations: [],
    });
    t.equal(fake.submissions('a lighthouse at dawn'), 1, 'one create');
  },
);

t.test('an event whose signature does not hold is 400 and changes nothing', async (t) => {
  const ws = await workspace();
  const { id, prediction } = await ws.create('a forged ending', succeeding());
  fake.advance(prediction);
  fake.advance(prediction);
  const before = await ws.get(id);
  const other = `whsec_${Buffer.from('another signing key of 32 bytes!').toString('base64')}`;
  const forged = await deliver(fake.webhook(prediction, { secret: other }));
  t.equal(forged.status, 400, 'signed with another secret');
  t.equal(forged.body.error?.code, 'validation_error');
  t.match(forged.body.error?.message, /^The event was refused: /);
  const genuine = fake.webhook(prediction);
  const tampered = JSON.parse(genuine.body.toString('utf8')) as Record<string, unknown>;
  tampered.output = ['https://attacker.example/x.png'];
  t.equal((await deliver({ headers: genuine.headers, body: Buffer.from(JSON.stringify(tampered)) })).status, 400, 'a body changed after signing');
  t.equal(
    (await deliver({ headers: { ...genuine.headers, 'webhook-signature': 'v1,AAAA' }, body: genuine.body })).status,
    400,
    "a signature that is not the body's",
  );
  const stale = fake.webhook(prediction, { at: new Date(Date.now() - 60 * 60_000) });
  t.equal((await deliver(stale)).status, 400, 'a signature an hour old');
  await new Promise((resolve) => setTimeout(resolve, 200));
  const after = await ws.get(id);
  t.same(after, before, 'the job is as it was');
  t.same((await ledgerByGeneration(query, ws.workspaceId))[id], { reserve: 1 }, 'still reserved');

  t.same(await deliver(genuine), { status: 200, body: { received: true, applied: true } }, 'the genuine event');
  t.equal((await ws.until(id, isTerminal, 'a terminal state')).status, 'succeeded');
});

t.test('completed before start: the job succeeds once, and the late start is acknowledged without effect', async (t) => {
  const ws = await workspace();
  const { id, prediction } = await ws.create('events out of order', succeeding(['one step']));
  fake.advance(prediction);
  const start = fake.webhook(prediction);
  fake.advance(prediction);
  const completed = fake.webhook(prediction);
  t.same(await deliver(completed), { status: 200, body: { received: true, applied: true } });
  const done = await ws.until(id, isTerminal, 'a terminal state');
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.same(await deliver(start), { status: 200, body: { received: true, applied: false } }, 'the job is no longer in flight');
  await new Promise((resolve) => setTimeout(resolve, 200));
  const after = await ws.get(id);
  t.same(after, done, 'nothing changed after it');
  // The log lines came with the completed event, while the job was still submitted; running is entered before the end.
  t.same(
    done.timeline.map((e) => [e.status, e.detail]),
    [
      ['queued', undefined],
      ['reserved', undefined],
      ['submitted', undefined],
      ['submitted', 'one step'],
      ['running', undefined],
      ['succeeded', undefined],
    ],
  );
  t.equal(done.outputAssetIds.length, 1);
  t.same((await ledgerByGeneration(query, ws.workspaceId))[id], { reserve: 1, capture: 1 });
});

t.test('a prediction that failed at Replicate ends failed with its error, and the money is released', async (t) => {
  const ws = await workspace();
  const { id, prediction } = await ws.create('out of memory', { advance: 'manual', end: { status: 'failed', error: `CUDA out of memory (token ${TOKEN})` } });
  fake.advance(prediction);
  fake.advance(prediction);
  t.same(await deliver(fake.webhook(prediction)), { status: 200, body: { received: true, applied: true } });
  const failed = await ws.until(id, isTerminal, 'a terminal state');
  t.equal(failed.status, 'failed');
  t.equal(failed.errorCode, 'provider_error');
  t.equal(failed.errorMessage, 'The prediction failed: CUDA out of memory (token [redacted])');
  t.notMatch(JSON.stringify(failed), TOKEN, 'the token is nowhere in the generation');
  t.same((await ledgerByGeneration(query, ws.workspaceId))[id], { reserve: 1, release: 1 });
  t.same(await moneyOf(query, ws.workspaceId), {
    available: STARTING_CREDITS,
    reserved: 0,
    ledgerAvailable: STARTING_CREDITS,
    ledgerReserved: 0,
    reservations: [],
  });
});

t.test('an event about a prediction no job has is acknowledged and not applied; a deployment without events is 404', async (t) => {
  // A prediction made at Replicate by someone else with the same account (its webhook pointing here).
  const made = await fetch(`${fake.baseUrl}/predictions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ version: VERSION, input: { prompt: 'not ours' } }),
  });
  t.equal(made.status, 201);
  const { id } = (await made.json()) as { id: string };
  fake.advance(id);
  t.same(await deliver(fake.webhook(id)), { status: 200, body: { received: true, applied: false } });

  const elsewhere = await server.fetch('/v1/providers/no-such-deployment/events', {
    method: 'POST',
    headers: fake.webhook(id).headers,
    body: fake.webhook(id).body,
  });
  t.equal(elsewhere.status, 404);
  t.equal(((await elsewhere.json()) as { error: { code: string } }).error.code, 'not_found');
});

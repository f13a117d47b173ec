import t from 'tap';
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { freePort } from '../helpers/ports.ts';
import { downloadAsset, STARTING_CREDITS, writeTestCatalog } from '../helpers/provider-service.ts';
import { encodePng } from '../../providers/local/png.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { falWebhookUrl } from '../../providers/fal/job-token.ts';
import { decode, fixture } from './support.ts';
import { startFakeFal, type FakeRequest, type RequestScript } from '../fakes/fal.ts';
import { createGeneration, getGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from '../generations/flow.ts';

/**
 * The fal adapter through the public API, followed by fal's ED25519-signed webhooks: the fake signs with a key
 * pair made here, whose public half is FAL_WEBHOOK_JWKS, and posts each outcome to the service's events route
 * at its BASE_URL (a port chosen before the start, so the URL the adapter hands fal is the one it listens on).
 * The backstop poll is a minute away, and requests are held where they are: what settles a job is its webhook.
 */
const KEY = 'fake-key-id-0007:fake-key-secret-fedcba9876543210';
const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const intruder = generateKeyPairSync('ed25519');
const JWKS = JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'fal-test-1', use: 'sig', alg: 'EdDSA' }] });
const IMAGE = await encodePng(24, 16, new Uint8Array(24 * 16 * 3).fill(120));
const CLIP = await fixture('testsrc2=s=64x48:r=10:d=0.3', ['-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-movflags', 'frag_keyframe+empty_moov', '-f', 'mp4']);
let files = 0;

const fake = await startFakeFal({
  key: KEY,
  signingKey: privateKey,
  endpoints: {
    'fal-ai/flux/schnell': {
      required: ['prompt'],
      result: (_input, f) => ({ images: [{ url: f.host(`sketch-${++files}.png`, IMAGE), width: 24, height: 16, content_type: 'image/png' }], seed: 7 }),
    },
    'fal-ai/kling-video/v2/master/text-to-video': {
      required: ['prompt'],
      result: (_input, f) => ({ video: { url: f.host(`clip-${++files}.mp4`, CLIP), content_type: 'video/mp4' } }),
    },
  },
});
t.teardown(() => fake.close());

const catalogFile = writeTestCatalog(t, [
  {
    id: 'acme/sketch',
    mode: 'text_to_image',
    price: { per: 'image', credits: 3 },
    parameters: { prompt: { required: true } },
    deployments: [{ id: 'sketch-fal', provider: 'fal', target: { endpoint: 'fal-ai/flux/schnell' } }],
  },
  {
    id: 'acme/clip',
    mode: 'text_to_video',
    price: { per: 'job', credits: 9 },
    parameters: { prompt: { required: true } },
    deployments: [{ id: 'clip-fal', provider: 'fal', target: { endpoint: 'fal-ai/kling-video/v2/master/text-to-video' } }],
  },
]);

const port = await freePort();
const server = await startTestServer(t, {
  env: {
    PORT: String(port),
    BASE_URL: `http://127.0.0.1:${port}`,
    CATALOG_FILE: catalogFile,
    ALLOW_PRIVATE_EGRESS: 'true',
    FAL_KEY: KEY,
    FAL_QUEUE_URL: fake.url,
    FAL_WEBHOOK_JWKS: JWKS,
    PROVIDER_POLL_MS: '60000',
    PROVIDER_REQUEST_TIMEOUT_MS: '5000',
  },
});
const query = serverQuery(server);

async function workspace() {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
  /** Creates a job whose fal request stays where it is until advanced; answers it with that request. */
  const create = async (model: string, mode: string, prompt: string, script: RequestScript = {}) => {
    fake.script({ hold: true, ...script });
    const created = await createGeneration(server, key, user.workspaceId, { model, mode, params: { prompt } });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
    await waitFor(server, key, user.workspaceId, created.body.id, (g) => g.status === 'submitted', 'submitted');
    const request = [...fake.requests.values()].find((r) => r.input.prompt === prompt)!;
    return { id: created.body.id, request };
  };
  const get = (id: string) => getGeneration(server, key, user.workspaceId, id);
  const settled = (id: string) => waitFor(server, key, user.workspaceId, id, isTerminal, 'a terminal state');
  return { workspaceId: user.workspaceId, key, create, get, settled };
}

async function deliver(deployment: string, delivery: { headers: Record<string, string>; body: Buffer }) {
  const response = await server.fetch(`/v1/providers/${deployment}/events`, { method: 'POST', headers: delivery.headers, body: delivery.body });
  return { status: response.status, body: (await response.json()) as { received?: true; applied?: boolean; error?: { code: string; message: string } } };
}

const statusPolls = (request: FakeRequest) => fake.calls.filter((c) => c.includes(`/requests/${request.id}/status`)).length;
const webhookAnswers = (request: FakeRequest) => fake.webhooks.filter((w) => w.id === request.id).map((w) => w.status);

t.test("OK: fal's own webhook to the events URL settles the job (no status poll); the image stored; a redelivery is not applied", async (t) => {
  const ws = await workspace();
  const { id, request } = await ws.create('acme/sketch', 'text_to_image', 'a fox in the snow');
  t.equal(
    request.webhook,
    falWebhookUrl(`http://127.0.0.1:${port}/v1/providers/sketch-fal/events`, KEY, id),
    "the submission asks for the webhook at the deployment's events URL, the job's own id and token in its query",
  );
  await fake.advance(request.id, 'COMPLETED');
  t.same(webhookAnswers(request), [200], "the events route took fal's delivery");
  const done = await ws.settled(id);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(statusPolls(request), 0, 'never polled: the webhook settled it');
  t.same([...new Set(done.timeline.map((e) => e.status))], ['queued', 'reserved', 'submitted', 'running', 'succeeded'], 'running before succeeded');
  const bytes = await downloadAsset(server, ws.key, ws.workspaceId, done.outputAssetIds[0]!);
  t.equal(sniffContentType(bytes), 'image/png');
  t.same(imageDimensions(bytes), { width: 24, height: 16 });

  t.same(await deliver('sketch-fal', fake.delivery(request.id)), { status: 200, body: { received: true, applied: false } }, "fal's retry of the same outcome");
  t.same((await ledgerByGeneration(query, ws.workspaceId))[id], { reserve: 1, capture: 1 }, 'captured once');
  t.same(await moneyOf(query, ws.workspaceId), {
    available: STARTING_CREDITS - 3,
    reserved: 0,
    ledgerAvailable: STARTING_CREDITS - 3,
    ledgerReserved: 0,
    reservations: [],
  });
  t.equal(fake.submissionsByEndpoint.get('fal-ai/flux/schnell'), 1);
});

t.test('forged, tampered and stale deliveries are 400 and change nothing; the genuine one then settles the job', async (t) => {
  const ws = await workspace();
  fake.sendWebhooks = false;
  t.teardown(() => {
    fake.sendWebhooks = true;
  });
  const { id, request } = await ws.create('acme/sketch', 'text_to_image', 'a harbour at night');
  await fake.advance(request.id, 'COMPLETED');
  const before = await ws.get(id);
  t.equal(before.status, 'submitted');

  const genuine = fake.delivery(request.id);
  // fal's signed message, signed by a key the service was not given.
  const message = `${request.id}\n${genuine.headers['x-fal-webhook-user-id']}\n${genuine.headers['x-fal-webhook-timestamp']}\n${createHash('sha256').update(genuine.body).digest('hex')}`;
  const forgedSignature = sign(null, Buffer.from(message), intruder.privateKey).toString('hex');
  const refusals: Array<[string, { headers: Record<string, string>; body: Buffer }]> = [
    ['signed with a key not in the JWKS', { headers: { ...genuine.headers, 'x-fal-webhook-signature': forgedSignature }, body: genuine.body }],
    ['a body changed after signing', { headers: genuine.headers, body: Buffer.from(genuine.body.toString('utf8').replace('"OK"', '"ERROR"')) }],
    ['signed ten minutes ago', fake.delivery(request.id, Date.now() - 10 * 60_000)],
    [
      'no signature',
      { headers: Object.fromEntries(Object.entries(genuine.headers).filter(([name]) => name !== 'x-fal-webhook-signature')), body: genuine.body },
    ],
  ];
  for (const [what, delivery] of refusals) {
    const answer = await deliver('sketch-fal', delivery);
    t.equal(answer.status, 400, `${what}: 400`);
    t.equal(answer.body.error?.code, 'validation_error', `${what}: validation_error`);
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.same(await ws.get(id), before, 'the job is as it was');
  t.same((await ledgerByGeneration(query, ws.workspaceId))[id], { reserve: 1 }, 'still reserved');

  t.same(await deliver('sketch-fal', genuine), { status: 200, body: { received: true, applied: true } });
  const done = await ws.settled(id);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(statusPolls(request), 0);
});

t.test("ERROR: the job fails with the mapped code and fal's words, the key redacted, the money released", async (t) => {
  const ws = await workspace();
  const cases: Array<{ prompt: string; outcome: { status: number; body: unknown }; code: string; message: RegExp }> = [
    {
      prompt: 'something the checker flags',
      outcome: {
        status: 422,
        body: { detail: [{ loc: ['body', 'prompt'], msg: 'The prompt was flagged by the content checker.', type: 'content_policy_violation' }] },
      },
      code: 'provider_content_policy',
      message: /flagged by the content checker/,
    },
    {
      prompt: 'something the app cannot take',
      outcome: {
        status: 422,
        body: { detail: [{ loc: ['body', 'num_inference_steps'], msg: 'Input should be less than or equal to 12', type: 'less_than_equal' }] },
      },
      code: 'provider_input_rejected',
      message: /num_inference_steps: Input should be less than or equal to 12/,
    },
    {
      prompt: 'something that crashes the runner',
      outcome: { status: 500, body: { detail: `Runner crashed (Authorization: Key ${KEY})` } },
      code: 'provider_error',
      message: /Runner crashed/,
    },
  ];
  for (const c of cases) {
    const { id, request } = await ws.create('acme/sketch', 'text_to_image', c.prompt, { outcome: c.outcome });
    await fake.advance(request.id, 'COMPLETED');
    t.same(webhookAnswers(request), [200], `${c.code}: delivered`);
    const failed = await ws.settled(id);
    t.equal(failed.status, 'failed', `${c.code}: failed`);
    t.equal(failed.errorCode, c.code);
    t.match(failed.errorMessage, c.message, `${c.code}: fal's words`);
    t.notOk(JSON.stringify(failed).includes(KEY.split(':')[1]!) || JSON.stringify(failed).includes(KEY.split(':')[0]!), `${c.code}: nothing of the key`);
    t.same((await ledgerByGeneration(query, ws.workspaceId))[id], { reserve: 1, release: 1 }, `${c.code}: released`);
    t.equal(statusPolls(request), 0, `${c.code}: settled by the webhook`);
  }
  t.same(await moneyOf(query, ws.workspaceId), {
    available: STARTING_CREDITS,
    reserved: 0,
    ledgerAvailable: STARTING_CREDITS,
    ledgerReserved: 0,
    reservations: [],
  });
});

t.test('text_to_video on an endpoint with a subpath: the clip stored, an MP4 that decodes', async (t) => {
  const ws = await workspace();
  const { id, request } = await ws.create('acme/clip', 'text_to_video', 'waves on a pier');
  t.equal(request.app, 'fal-ai/kling-video');
  await fake.advance(request.id, 'COMPLETED');
  const done = await ws.settled(id);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  const bytes = await downloadAsset(server, ws.key, ws.workspaceId, done.outputAssetIds[0]!);
  t.equal(bytes.subarray(4, 8).toString('latin1'), 'ftyp', 'an MP4 container');
  t.ok(bytes.equals(CLIP), 'the bytes fal served');
  const decoded = await decode(bytes);
  t.equal(decoded.code, 0, 'ffmpeg reads it');
  t.same([decoded.videoCodec, decoded.width, decoded.height], ['h264', 64, 48]);
  const [asset] = await query<{ content_type: string }>('select content_type from assets where id = ?', [done.outputAssetIds[0]]);
  t.equal(asset!.content_type, 'video/mp4');
  t.same((await ledgerByGeneration(query, ws.workspaceId))[id], { reserve: 1, capture: 1 });
});

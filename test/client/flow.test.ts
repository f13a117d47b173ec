import t from 'tap';
import { ApiError, WaitTimeoutError, type Generation } from '@generation-service/client';
import { verifyWebhook, WebhookVerificationError } from '@generation-service/client/webhooks';
import { sharedTestServer, startTestServer } from '../helpers/server.ts';
import { startReceiver } from '../webhooks/support.ts';
import { sdkTenant, thrown } from './support.ts';

// A high per-key limit: this file is about the flow, test/client/retries.test.ts about 429s.
const ENV = { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_FREE: '100000' };
const TEXT = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'Say hello' } } as const;

t.test('with only the SDK and a key: create, wait, read, list, usage, credits, wallet, webhooks', async (t) => {
  const server = await sharedTestServer(ENV);
  const receiver = await startReceiver(t);
  const { sdk, sent, workspaceId } = await sdkTenant(server);

  const models = await sdk.models.list();
  t.ok(
    models.some((m) => m.id === 'local/text-mini' && m.mode === 'text_to_text'),
    'GET /v1/models with the workspaceId filled in',
  );
  t.equal(sent.at(-1)!.url.searchParams.get('workspaceId'), workspaceId, "the query got the client's workspaceId");

  const hook = await sdk.webhooks.create({ url: receiver.url, eventTypes: ['generation.completed'] });
  t.match(hook.secret, /^whsec_/, 'the signing secret, once');
  t.equal(JSON.parse(sent.at(-1)!.body).workspaceId, workspaceId, "the body got the client's workspaceId");
  const hooks = [];
  for await (const h of sdk.webhooks.list()) hooks.push(h.id);
  t.same(hooks, [hook.id]);

  const created = await sdk.generations.create({ ...TEXT, project: 'flow' });
  t.equal(created.status, 'queued');
  t.match(created.id, /^gen_/);
  const done: Generation = await sdk.waitFor(created.id, { timeoutMs: 60_000, intervalMs: 20 });
  t.equal(done.status, 'succeeded');
  t.type(done.textOutput, 'string');
  t.equal(done.credits, 1);
  t.ok(sent.filter((s) => s.url.pathname === `/v1/generations/${created.id}`).length >= 1, 'polled GET /v1/generations/:id');
  t.same((await sdk.generations.get(created.id)).id, created.id);

  // The delivery of generation.completed, signed by the service, checked with the SDK's verifier.
  const [delivery] = await receiver.waitFor(1);
  const signature = delivery!.headers['x-service-signature'] as string;
  const event = verifyWebhook(delivery!.rawBody, signature, hook.secret);
  t.equal(event.event, 'generation.completed');
  t.equal(event.data.generationId, created.id);
  const tampered = Buffer.from(delivery!.rawBody.toString('utf8').replace('"credits":1', '"credits":0'));
  t.not(tampered.toString(), delivery!.rawBody.toString(), 'the tampered body differs');
  const refused = await thrown(t, async () => verifyWebhook(tampered, signature, hook.secret));
  t.ok(refused instanceof WebhookVerificationError);
  t.equal(refused.code, 'signature_mismatch');
  t.equal((await thrown(t, async () => verifyWebhook(delivery!.rawBody, signature, 'whsec_not_the_secret'))).code, 'signature_mismatch', 'another secret');

  const usage = await sdk.usage.get();
  t.ok(usage, 'GET /v1/usage');
  const credits = await sdk.credits.get();
  t.type(credits, 'object', 'GET /v1/workspaces/:workspaceId/credits');
  const wallet = await sdk.wallet.get();
  t.type(wallet, 'object', 'GET /v1/wallet');
  const transactions = [];
  for await (const tx of sdk.wallet.transactions({ limit: 5 })) transactions.push(tx);
  t.same(transactions, [], 'no wallet transactions yet');

  // An image job makes assets: list and get them.
  const image = await sdk.generations.create({ mode: 'text_to_image', model: 'local/image-fast', params: { prompt: 'a lighthouse', numImages: 2 } });
  const imageDone = await sdk.waitFor(image.id, { timeoutMs: 60_000, intervalMs: 20 });
  t.equal(imageDone.status, 'succeeded');
  t.equal(imageDone.outputAssetIds.length, 2);
  const assets = [];
  for await (const asset of sdk.assets.list({ sourceGenerationId: image.id, limit: 1 })) assets.push(asset.id);
  t.same(assets.sort(), [...imageDone.outputAssetIds].sort(), 'both assets, one per page');
  const asset = await sdk.assets.get(imageDone.outputAssetIds[0]!);
  t.equal(asset.id, imageDone.outputAssetIds[0]);

  // The raw typed client is there for everything else, with the same habits.
  const raw = await sdk.raw.GET('/v1/generations/{id}', { params: { path: { id: created.id } } });
  t.equal(raw.response.status, 200);
  t.equal(raw.data?.status, 'succeeded');
});

t.test('for await walks every page of a list, a few items at a time', async (t) => {
  const server = await sharedTestServer(ENV);
  const { sdk, sent } = await sdkTenant(server);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await sdk.generations.create({ ...TEXT, project: 'paged' })).id);
  await sdk.generations.create({ ...TEXT, project: 'other' });

  const before = sent.length;
  const listed: string[] = [];
  for await (const generation of sdk.generations.list({ project: 'paged', limit: 2 })) listed.push(generation.id);
  t.same(listed.sort(), [...ids].sort(), 'each generation of the project once');
  const pageRequests = sent.slice(before);
  t.equal(pageRequests.length, 3, 'three pages of at most 2');
  t.equal(pageRequests[0]!.url.searchParams.get('cursor'), null, 'the first page without a cursor');
  t.ok(
    pageRequests.slice(1).every((s) => s.url.searchParams.get('cursor')),
    'the next ones with the previous nextCursor',
  );
  t.ok(
    pageRequests.every((s) => s.url.searchParams.get('limit') === '2' && s.url.searchParams.get('project') === 'paged'),
    'the query kept on every page',
  );

  const sizes: number[] = [];
  for await (const page of sdk.generations.list({ project: 'paged', limit: 2 }).pages()) sizes.push(page.data.length);
  t.same(sizes, [2, 2, 1]);

  let early = 0;
  for await (const _ of sdk.generations.list({ limit: 2 })) if (++early === 3) break;
  t.equal(early, 3, 'breaking out stops the walk');
});

t.test('answers other than 2xx raise ApiError with code, message, requestId and status', async (t) => {
  const server = await sharedTestServer(ENV);
  const { sdk, sent } = await sdkTenant(server);
  const other = await sdkTenant(server);

  const created = await sdk.generations.create(TEXT);
  const missing = await thrown(t, () => sdk.generations.get(`${created.id.slice(0, -4)}zzzz`));
  t.ok(missing instanceof ApiError, 'an ApiError');
  t.match(missing, { name: 'ApiError', code: 'not_found', status: 404 });
  t.match(missing.requestId, /\S/);
  t.equal(missing.requestId, sent.at(-1)!.requestId, 'the request id of the answer (X-Request-Id)');
  t.type(missing.message, 'string');

  const invalid = await thrown(t, () => sdk.generations.create({ ...TEXT, params: { prompt: 'x', temperature: 3 } }));
  t.match(invalid, { code: 'validation_error', status: 400 });
  t.match(invalid.message, /temperature/);
  t.equal(invalid.requestId, sent.at(-1)!.requestId);

  const foreign = await thrown(t, () => other.sdk.generations.get(created.id));
  t.match(foreign, { code: 'not_found', status: 404 }, "another workspace's generation is not found");
  const forbidden = await thrown(t, async () => {
    for await (const _ of sdk.generations.list({ workspaceId: other.workspaceId })) break;
  });
  t.match(forbidden, { code: 'forbidden', status: 403 }, 'a workspaceId given by the caller is kept, not replaced');

  const finished = await sdk.waitFor(created.id, { timeoutMs: 60_000, intervalMs: 20 });
  const conflict = await thrown(t, () => sdk.generations.cancel(finished.id));
  t.match(conflict, { code: 'conflict', status: 409 }, 'cancel of a finished generation');

  const raw = await sdk.raw.GET('/v1/generations/{id}', { params: { path: { id: 'gen_nope' } } });
  t.equal(raw.data, undefined, 'the raw client answers errors as data, not exceptions');
  t.type(raw.error?.error.code, 'string');
});

t.test('creates carry an Idempotency-Key: a given one replays, automatic ones are new each time', async (t) => {
  const server = await sharedTestServer(ENV);
  const { sdk, sent } = await sdkTenant(server);

  const first = await sdk.generations.create(TEXT, { idempotencyKey: 'order-1' });
  const again = await sdk.generations.create(TEXT, { idempotencyKey: 'order-1' });
  t.equal(again.id, first.id, 'the same key answers the same generation');
  const creates = () => sent.filter((s) => s.method === 'POST' && s.url.pathname === '/v1/generations');
  t.same(
    creates().map((s) => s.headers.get('idempotency-key')),
    ['order-1', 'order-1'],
  );

  const a = await sdk.generations.create(TEXT);
  const b = await sdk.generations.create(TEXT);
  t.not(a.id, b.id, 'two calls without a key are two generations');
  const [keyA, keyB] = creates()
    .slice(2)
    .map((s) => s.headers.get('idempotency-key'));
  t.match(keyA, /^[0-9a-f-]{36}$/, 'a key was set automatically');
  t.not(keyA, keyB, 'a new key for each call');

  const conflict = await thrown(t, () => sdk.generations.create({ ...TEXT, params: { prompt: 'other' } }, { idempotencyKey: 'order-1' }));
  t.match(conflict, { code: 'conflict', status: 409 }, 'the same key with another body');

  const raw = await sdk.raw.POST('/v1/generations', { body: TEXT, headers: { 'Idempotency-Key': 'raw-1' } });
  t.equal(raw.response.status, 201);
  t.equal(creates().at(-1)!.headers.get('idempotency-key'), 'raw-1', 'the raw client keeps a key it is given');

  const batch = await sdk.generations.createBatch([TEXT, { ...TEXT, idempotencyKey: 'item-1' }]);
  t.equal(batch.results.length, 2);
  const items = JSON.parse(sent.at(-1)!.body).items as Array<{ idempotencyKey: string }>;
  t.match(items[0]!.idempotencyKey, /^[0-9a-f-]{36}$/, 'batch items get their own keys');
  t.equal(items[1]!.idempotencyKey, 'item-1');
});

t.test('waitFor gives up after timeoutMs with the last state', async (t) => {
  const server = await startTestServer(t, { env: { ...ENV, LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const { sdk } = await sdkTenant(server);
  const created = await sdk.generations.create(TEXT);
  const error = await thrown(t, () => sdk.waitFor(created.id, { timeoutMs: 300, intervalMs: 50 }));
  t.ok(error instanceof WaitTimeoutError);
  t.equal(error.generation.id, created.id);
  t.not(error.generation.status, 'succeeded');
  await sdk.generations.cancel(created.id);
  t.equal((await sdk.waitFor(created.id)).status, 'cancelled', 'cancelled is terminal');
});

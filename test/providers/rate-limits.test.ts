import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { STARTING_CREDITS, writeTestCatalog } from '../helpers/provider-service.ts';
import { makePng } from '../helpers/files.ts';
import { startFakeFal } from '../fakes/fal.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from '../generations/flow.ts';
import { MAX_RATE_LIMIT_BACKOFF_MS, rateLimitBackoffMs, retryingRateLimits, type UpstreamResponse } from '../../providers/upstream-http.ts';

/**
 * A provider that keeps answering 429: each request is called at most the deployment's
 * `limits.rateLimitAttempts` times (catalog), with exponential backoff and jitter that honours Retry-After;
 * then the job goes to the next deployment of its model, or fails with provider_rate_limited and its credits
 * released. The fal fake answers 429 with `Retry-After: 0` to its next submissions.
 */
const KEY = 'fake-key-id-0013:fake-key-secret-limited0123456789';
const fake = await startFakeFal({
  key: KEY,
  endpoints: {
    'fal-ai/flux/dev': {
      required: ['prompt'],
      result: () => ({ images: [{ url: fake.host('r.png', makePng(8, 8)), content_type: 'image/png', width: 8, height: 8 }], seed: 1 }),
    },
  },
});
t.teardown(() => fake.close());

const catalogFile = writeTestCatalog(t, [
  {
    id: 'acme/limited',
    mode: 'text_to_image',
    price: { per: 'job', credits: 4 },
    parameters: { prompt: { required: true } },
    deployments: [{ id: 'limited-fal', provider: 'fal', target: { endpoint: 'fal-ai/flux/dev' }, limits: { rateLimitAttempts: 3 } }],
  },
  {
    id: 'acme/spilled',
    mode: 'text_to_image',
    price: { per: 'job', credits: 4 },
    parameters: { prompt: { required: true } },
    deployments: [
      { id: 'spilled-fal', provider: 'fal', target: { endpoint: 'fal-ai/flux/dev' }, limits: { rateLimitAttempts: 2 } },
      { id: 'spilled-local', provider: 'local' },
    ],
  },
  {
    id: 'acme/polled',
    mode: 'text_to_image',
    price: { per: 'job', credits: 4 },
    parameters: { prompt: { required: true } },
    deployments: [{ id: 'polled-fal', provider: 'fal', target: { endpoint: 'fal-ai/flux/dev' }, limits: { pollMs: 20 } }],
  },
]);
const server = await startTestServer(t, {
  env: { CATALOG_FILE: catalogFile, ALLOW_PRIVATE_EGRESS: 'true', FAL_KEY: KEY, FAL_QUEUE_URL: fake.url, PROVIDER_POLL_MS: '600000' },
});
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
const submits = () => fake.calls.filter((call) => call.startsWith('POST ')).length;

t.test('backoff: exponential from its base with jitter, never under Retry-After, capped', async (t) => {
  t.equal(
    rateLimitBackoffMs(1, 1_000, undefined, () => 0),
    500,
    'half of the base at the least',
  );
  t.equal(
    rateLimitBackoffMs(1, 1_000, undefined, () => 1),
    1_000,
    'the base at the most',
  );
  t.equal(
    rateLimitBackoffMs(3, 1_000, undefined, () => 1),
    4_000,
    'doubling',
  );
  t.equal(
    rateLimitBackoffMs(30, 1_000, undefined, () => 1),
    MAX_RATE_LIMIT_BACKOFF_MS,
    'capped',
  );
  t.equal(
    rateLimitBackoffMs(1, 1_000, 7_000, () => 1),
    7_000,
    'a longer Retry-After is honoured',
  );

  const answer = (status: number): UpstreamResponse => ({ status, headers: { 'retry-after': '0' }, text: '', json: undefined, bytes: Buffer.alloc(0) });
  let calls = 0;
  const waits: number[] = [];
  const last = await retryingRateLimits(
    async () => {
      calls++;
      return answer(429);
    },
    Date.now() + 60_000,
    () => Date.now(),
    (ms) => waits.push(ms),
    4,
    undefined,
    { maxAttempts: 4, random: () => 1 },
  );
  t.equal(last.status, 429, 'the last 429 is given back');
  t.equal(calls, 4, 'four calls, as capped');
  t.same(waits, [4, 8, 16], 'three waits between them, doubling');
});

t.test('a deployment that keeps answering 429: calls bounded as configured, then provider_rate_limited and the credits released', async (t) => {
  const before = submits();
  // Exactly as many 429s as the cap: with a higher cap the next call would be taken, and the job would succeed.
  fake.fault('submit', { status: 429, headers: { 'retry-after': '0' }, body: { detail: 'Too many requests' } }, 3);
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/limited', params: { prompt: 'limited' } });
  t.equal(created.status, 201, JSON.stringify(created.body));
  const g = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  t.match(g, { status: 'failed', errorCode: 'provider_rate_limited' });
  t.equal(submits() - before, 3, "three calls at fal: the deployment's rateLimitAttempts");
  const money = await moneyOf(serverQuery(server), user.workspaceId);
  t.equal(money.available, STARTING_CREDITS, 'nothing charged');
  t.equal(money.reserved, 0, 'nothing left reserved');
  const ledger = await ledgerByGeneration(serverQuery(server), user.workspaceId);
  t.same(ledger[created.body.id], { reserve: 1, release: 1 }, 'reserved, then released');
});

t.test('with another deployment of the model: the job goes there once the cap is reached', async (t) => {
  const before = submits();
  fake.fault('submit', { status: 429, headers: { 'retry-after': '0' } }, 2);
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/spilled', params: { prompt: 'spilled' } });
  const g = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  t.equal(g.status, 'succeeded', JSON.stringify([g.errorCode, g.errorMessage]));
  t.equal(submits() - before, 2, "two calls at fal: that deployment's cap");
  t.ok(
    g.timeline.some((e) => /attempt on spilled-fal failed: provider_rate_limited.*trying spilled-local/.test(e.detail ?? '')),
    'rerouted to the local deployment',
  );
});

t.test("a deployment's own polling interval: its jobs are polled at its pollMs, not PROVIDER_POLL_MS (here 10 minutes)", async (t) => {
  // fal's requests move on status polls only (the fake), and no webhook is asked for: only polls can end this job.
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/polled', params: { prompt: 'polled' } });
  const g = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  t.equal(g.status, 'succeeded', JSON.stringify([g.errorCode, g.errorMessage]));
  t.ok(fake.calls.filter((call) => call.includes('/status')).length >= 3, 'polled through the queue and the progress');
});

import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { freePort } from '../helpers/ports.ts';
import { PLAN_CREDITS, providerCatalogFile } from '../helpers/provider-catalog.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { jobToken } from '../../providers/cog/webhook.ts';
import { dataUrl, startCogFake } from '../fakes/cog.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor, type Gen } from '../generations/flow.ts';

/**
 * A Cog deployment through the public API: the real server (HTTP in and out) with the Cog fake as its
 * container. Jobs are created by POST /v1/generations, the container's webhooks reach
 * POST /v1/providers/{deployment}/events with each job's token, the images are stored and downloaded, and
 * each job is charged once. PROVIDER_POLL_MS is long: the webhooks alone move the jobs (no backstop PUT).
 */
const SECRET = 'cog-webhook-secret-of-at-least-32-characters';
const DEPLOYMENT = 'painter-cog';
const EVENTS = `/v1/providers/${DEPLOYMENT}/events`;

const fake = await startCogFake({
  slots: 4,
  requiredInputs: ['prompt'],
  model: (input) =>
    String(input.prompt).startsWith('hold') ? { hold: true } : { output: [dataUrl('image/png', makePng(Number(input.width), Number(input.height)))] },
});
t.teardown(() => fake.close());

const catalogFile = providerCatalogFile(t, [
  {
    id: 'acme/painter',
    mode: 'text_to_image',
    credits: 7,
    parameters: { prompt: { required: true }, aspectRatio: {} },
    deployment: { id: DEPLOYMENT, provider: 'cog', target: {}, input: { aspectRatio: { width: 'width', height: 'height', longSide: 64 } } },
  },
]);

// The service's public address must be known before it starts: Cog posts to the URL the PUT named.
const port = await freePort();
const server: TestServer = await startTestServer(t, {
  env: {
    PORT: String(port),
    BASE_URL: `http://127.0.0.1:${port}`,
    CATALOG_FILE: catalogFile,
    ALLOW_PRIVATE_EGRESS: 'true',
    COG_BASE_URL: fake.url,
    COG_WEBHOOK_SECRET: SECRET,
    COG_MAX_CONCURRENT_JOBS: '4',
    PROVIDER_POLL_MS: '600000',
    PROVIDER_REQUEST_TIMEOUT_MS: '5000',
  },
});
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
const query = serverQuery(server);

async function create(prompt: string, aspectRatio = '16:9'): Promise<string> {
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/painter', params: { prompt, aspectRatio } });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
  return created.body.id;
}

async function download(assetId: string): Promise<Buffer> {
  const link = await server.json(`/v1/assets/${assetId}/download?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  if (link.status !== 200) throw new Error(`download link: ${link.status} ${JSON.stringify(link.body)}`);
  return Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
}

const postEvent = (query: string, body: unknown) =>
  server.json(`${EVENTS}?${query}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'user-agent': 'coglet/0.17.0' },
    body: JSON.stringify(body),
  });
const row = async (id: string) =>
  (await query<{ status: string; provider_job_id: string | null }>('select status, provider_job_id from generations where id = ?', [id]))[0]!;

t.test(
  'a Cog job from POST /v1/generations runs once at the container, its webhooks settle it, its image is stored and the credits captured once',
  async (t) => {
    const id = await create('a lighthouse at dawn');
    const done = await waitFor(server, key, user.workspaceId, id, isTerminal, 'a terminal state');
    t.equal(done.status, 'succeeded', JSON.stringify([done.errorCode, done.errorMessage]));
    t.same(
      done.timeline.map((e) => e.status),
      ['queued', 'reserved', 'submitted', 'running', 'succeeded'],
      'submitted, then running (the start webhook), then succeeded',
    );
    await fake.settled(id);

    t.equal(fake.runs.get(id), 1, 'one run at Cog, under the generation id');
    t.equal(fake.puts.get(id), 1, 'one PUT: nothing was asked again');
    t.same(fake.inputs.get(id)?.input, { prompt: 'a lighthouse at dawn', width: 64, height: 40 }, "the catalog's mapping of the parameters");
    t.same(
      fake.webhooksSent.filter((w) => w.id === id).map((w) => [w.status, w.answer]),
      [
        ['processing', 200],
        ['succeeded', 200],
      ],
      'the start and the end webhooks, each taken by the events route',
    );
    const put = fake.requests.find((r) => r.method === 'PUT' && r.path === `/predictions/${id}`)!;
    t.equal(put.headers.prefer, 'respond-async');

    t.equal(done.outputAssetIds.length, 1);
    const bytes = await download(done.outputAssetIds[0]!);
    t.equal(sniffContentType(bytes), 'image/png', 'the data URL Cog answered, decoded and stored');
    t.same(imageDimensions(bytes), { width: 64, height: 40 });

    const money = await moneyOf(query, user.workspaceId);
    t.same(
      money,
      { available: PLAN_CREDITS - 7, reserved: 0, ledgerAvailable: PLAN_CREDITS - 7, ledgerReserved: 0, reservations: [] },
      '7 credits captured; the balance equals the ledger',
    );
    t.same((await ledgerByGeneration(query, user.workspaceId))[id], { reserve: 1, capture: 1 });
  },
);

t.test("an event without the job's own token is refused with 400 and changes nothing; the container's own webhook ends the job", async (t) => {
  const before = await moneyOf(query, user.workspaceId);
  const id = await create('hold: a boat at sea', '1:1');
  const other = await create('hold: a second job', '1:1');
  // Only the start webhook makes them running (no backstop PUT). It comes about as soon as Cog answered the PUT,
  // often before the job's provider id is written: the events route finds such a job by its own id.
  for (const g of [id, other]) await waitFor(server, key, user.workspaceId, g, (x) => x.status === 'running', 'running');
  const forged = { id, status: 'succeeded', logs: '', output: [dataUrl('image/png', makePng(5, 5))], metrics: { predict_time: 0.1 } };

  const refusals: Array<[string, string, unknown]> = [
    ['a made-up token', `job=${id}&token=${'0'.repeat(64)}`, forged],
    ['the token of another job', `job=${id}&token=${jobToken(SECRET, other)}`, forged],
    ["another job named in the query, with its token, over this job's body", `job=${other}&token=${jobToken(SECRET, other)}`, forged],
    ['no token', `job=${id}`, forged],
    ['a token made with another secret', `job=${id}&token=${jobToken(`${SECRET}x`, id)}`, forged],
  ];
  for (const [what, q, body] of refusals) {
    const answer = await postEvent(q, body);
    t.match(answer, { status: 400, body: { error: { code: 'validation_error' } } }, what);
    t.notMatch(JSON.stringify(answer.body), SECRET, 'the secret is never in the answer');
  }
  const answered = await server.json(`/v1/providers/no-such-deployment/events?job=${id}&token=${jobToken(SECRET, id)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(forged),
  });
  t.equal(answered.status, 404, 'a deployment the catalog does not have');
  t.same(await row(id), { status: 'running', provider_job_id: id }, 'still running: no refused event moved it');
  t.equal((await waitFor(server, key, user.workspaceId, id, () => true)).outputAssetIds.length, 0);

  // The container ends the runs; its webhooks (with the right tokens) settle both jobs.
  fake.finish(id, { output: [dataUrl('image/png', makePng(12, 12))] });
  fake.finish(other, { output: [dataUrl('image/png', makePng(13, 13))] });
  const done: Gen[] = [];
  for (const g of [id, other]) done.push(await waitFor(server, key, user.workspaceId, g, isTerminal, 'a terminal state'));
  t.same(
    done.map((g) => g.status),
    ['succeeded', 'succeeded'],
  );
  t.same(imageDimensions(await download(done[0]!.outputAssetIds[0]!)), { width: 12, height: 12 }, "the container's image, not the forged one");
  t.same(imageDimensions(await download(done[1]!.outputAssetIds[0]!)), { width: 13, height: 13 });

  // A replay of a valid event after the end is acknowledged and changes nothing.
  const replay = await postEvent(`job=${id}&token=${jobToken(SECRET, id)}`, { ...forged, output: [dataUrl('image/png', makePng(6, 6))] });
  t.same([replay.status, replay.body], [200, { received: true, applied: false }], 'a job that ended takes no more events');
  for (const g of [id, other]) t.equal(fake.runs.get(g), 1, `${g}: one run`);
  const after = await moneyOf(query, user.workspaceId);
  t.same(
    after,
    { ...before, available: before.available - 14, ledgerAvailable: before.ledgerAvailable - 14 },
    'two jobs, 7 credits each, captured once; the balance equals the ledger',
  );
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  for (const g of [id, other]) t.same(ledger[g], { reserve: 1, capture: 1 });
});

import t from 'tap';
import { randomBytes } from 'node:crypto';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { PLAN_CREDITS, providerCatalogFile } from '../helpers/provider-catalog.ts';
import { startRelay } from '../helpers/relay.ts';
import { serveDurable, withDatabase } from './crash-support.ts';
import { dataUrl, startCogFake } from '../fakes/cog.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, waitFor, type Gen } from '../generations/flow.ts';

/**
 * kill -9 of the real server with Cog jobs at every phase: a PUT in flight whose answer never came (the run
 * started at Cog), a prediction accepted and starting (its start webhook lost), one processing, and one that
 * finished while the service was down. After the restart each settles, and each is charged once.
 *
 * Cog runs a job under our generation id, and a PUT of an id it is running joins that run: wherever the job
 * was still running at Cog, the fake counts one run. Cog keeps nothing of a run that ended: the one that
 * ended while no process followed it, its end webhook refused meanwhile, is run again by the resume's PUT
 * (docs/providers/cog.md, "No GET, and what a second PUT does"), the one case Cog gives no way to avoid.
 *
 * Two relays stand for the network: one at the service's public address (BASE_URL, where Cog posts), which
 * answers 503 while no process is up, and one in front of the container, which can lose an answer.
 * PROVIDER_POLL_MS is long, so only the webhooks and the resume's PUT move the jobs.
 */
const storage = await durableStorage(t, 'gs-cog-crash-');
const SECRET = 'cog-webhook-secret-of-at-least-32-characters';
const fake = await startCogFake({ slots: 10, requiredInputs: ['prompt'], model: () => ({ hold: true }) });
t.teardown(() => fake.close());
const front = await startRelay(t);
const toCog = await startRelay(t, fake.url);

const catalogFile = providerCatalogFile(t, [
  {
    id: 'acme/painter',
    mode: 'text_to_image',
    credits: 7,
    parameters: { prompt: { required: true }, aspectRatio: {} },
    deployment: { id: 'painter-cog', provider: 'cog', target: {}, input: { aspectRatio: { width: 'width', height: 'height', longSide: 64 } } },
  },
]);
const redisPrefix = `gs-cog-crash-${randomBytes(4).toString('hex')}:`;

async function serve() {
  const served = await serveDurable(
    t,
    storage,
    catalogFile,
    {
      BASE_URL: front.url,
      COG_BASE_URL: toCog.url,
      COG_WEBHOOK_SECRET: SECRET,
      COG_MAX_CONCURRENT_JOBS: '10',
      PROVIDER_POLL_MS: '600000',
    },
    redisPrefix,
  );
  front.target = served.url;
  return served;
}

const withDb = <T>(fn: Parameters<typeof withDatabase<T>>[1]) => withDatabase(storage, fn);

const until = async (what: string, check: () => boolean) => {
  for (let i = 0; !check(); i++) {
    if (i > 2000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};
const webhooksOf = (id: string) => fake.webhooksSent.filter((w) => w.id === id).map((w) => [w.status, w.answer]);

t.test('after kill -9 at every phase of a Cog job, each settles; one run per job wherever it was still running at Cog; the money is exact', async (t) => {
  const first = await serve();
  const client = first.client;
  const user = await signUp(client);
  const { key } = await createKey(client, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
  const create = async (prompt: string) => {
    const created = await createGeneration(client, key, user.workspaceId, {
      mode: 'text_to_image',
      model: 'acme/painter',
      params: { prompt, aspectRatio: '1:1' },
    });
    t.equal(created.status, 201, JSON.stringify(created.body));
    return created.body.id as string;
  };
  const status = (id: string, wanted: string) => waitFor(client, key, user.workspaceId, id, (g) => g.status === wanted, wanted);

  // Accepted and starting, as far as the service knows: its start webhook finds no one (503) and is lost.
  front.target = undefined;
  const starting = await create('starting at the kill');
  await status(starting, 'submitted');
  await until('the start webhook of the starting job', () => webhooksOf(starting).length === 1);
  t.same(webhooksOf(starting), [['processing', 503]], 'its start webhook was refused, and Cog does not send a start again');
  front.target = first.url;

  const processing = await create('processing at the kill');
  await status(processing, 'running');
  const finished = await create('finished while the service was down');
  await status(finished, 'running');

  // A PUT that reached Cog (the run started) whose answer never came back.
  toCog.swallow = (method) => method === 'PUT';
  const inFlight = await create('PUT in flight at the kill');
  await until(
    "the lost PUT's run at Cog",
    () => webhooksOf(inFlight).length === 1 && toCog.seen.some((r) => r.method === 'PUT' && r.path === `/predictions/${inFlight}`),
  );
  t.ok(fake.inFlight(inFlight), 'the run started at Cog');

  first.child.proc.kill('SIGKILL');
  t.same(await first.child.exited, { code: null, signal: 'SIGKILL' });
  front.target = undefined;
  toCog.swallow = undefined;

  const before = await withDb((query) =>
    query<{ id: string; status: string; provider_job_id: string | null }>(
      'select id, status, provider_job_id from generations where workspace_id = ? order by created_at',
      [user.workspaceId],
    ),
  );
  t.same(
    before.map((r) => [r.id, r.status, r.provider_job_id]),
    [
      [starting, 'submitted', starting],
      [processing, 'running', processing],
      [finished, 'running', finished],
      [inFlight, 'reserved', null],
    ],
    "the accepted jobs' ids written before the kill; the job whose PUT got no answer has none",
  );

  // While the service is down, one run ends at Cog: its end webhook is refused until Cog gives up, and Cog forgets the run.
  fake.finish(finished, { output: [dataUrl('image/png', makePng(20, 20))] });
  await fake.settled(finished);
  const ends = webhooksOf(finished).slice(1);
  t.ok(
    ends.length === 4 && ends.every(([s, answer]) => s === 'succeeded' && (answer === 503 || answer === 0)),
    `the end refused at each of Cog's tries while the service was down: ${JSON.stringify(ends)}`,
  );
  t.notOk(fake.inFlight(finished), 'Cog keeps nothing of it');

  const second = await serve();
  const again = second.client;
  const statusAgain = (id: string, wanted: string) => waitFor(again, key, user.workspaceId, id, (g) => g.status === wanted, wanted);
  // Each is followed again: the resume's PUT joins the run in flight; the lost PUT's job is PUT again and joins too.
  for (const id of [starting, processing, inFlight]) await statusAgain(id, 'running');
  await until("the ended run started again by the resume's PUT", () => fake.inFlight(finished));
  for (const [id, size] of [
    [starting, 21],
    [processing, 22],
    [finished, 23],
    [inFlight, 24],
  ] as const) {
    fake.finish(id, { output: [dataUrl('image/png', makePng(size, size))] });
  }
  const done: Gen[] = [];
  for (const id of [starting, processing, finished, inFlight]) done.push(await waitFor(again, key, user.workspaceId, id, isTerminal, 'a terminal state'));
  t.same(
    done.map((g) => g.status),
    ['succeeded', 'succeeded', 'succeeded', 'succeeded'],
    JSON.stringify(done.map((g) => [g.status, g.errorCode, g.errorMessage])),
  );
  for (const g of done) t.equal(g.outputAssetIds.length, 1, `${g.id}: its image stored`);

  t.equal(fake.runs.get(starting), 1, "starting at the kill: one run (the resume's PUT joined it)");
  t.equal(fake.runs.get(processing), 1, "processing at the kill: one run (the resume's PUT joined it)");
  t.equal(fake.runs.get(inFlight), 1, 'PUT in flight at the kill: one run (the new PUT of the same id joined it)');
  t.equal(fake.runs.get(finished), 2, 'finished while down: run again, once (Cog kept nothing to look up)');
  const followed = done.map((g) => g.timeline.some((e) => e.detail === 'followed at its provider after a restart'));
  t.same(followed, [true, true, true, false], 'the accepted ones were followed, never submitted as new jobs');
  t.ok(
    done[2]!.timeline.some((e) => /runs again under the same id/.test(e.detail ?? '')),
    'the run again is on the timeline',
  );
  t.ok(
    done[3]!.timeline.some((e) => /^resubmitted after a restart/.test(e.detail ?? '')),
    'the job with no provider id was handed over again',
  );

  second.child.proc.kill('SIGTERM');
  await second.child.exited;
  await withDb(async (query) => {
    const money = await moneyOf(query, user.workspaceId);
    const left = PLAN_CREDITS - 4 * 7;
    t.same(
      money,
      { available: left, reserved: 0, ledgerAvailable: left, ledgerReserved: 0, reservations: [] },
      '4 × 7 credits captured once each; nothing left reserved; the ledger agrees',
    );
    const ledger = await ledgerByGeneration(query, user.workspaceId);
    for (const id of [starting, processing, finished, inFlight]) t.same(ledger[id], { reserve: 1, capture: 1 }, `${id}: reserved once, captured once`);
  });
});

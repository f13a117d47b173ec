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
import { eventually } from '../helpers/eventually.ts';

/**
 * kill -9 of the real server with Cog jobs at every phase: a PUT in flight whose answer never came (the run
 * started at Cog), a prediction accepted and starting (its start webhook lost), one processing, one that
 * finished while the service was down, and one whose PUT answer was lost and that finished while the service
 * was down. After the restart each settles, each is charged once, and each ran once at Cog.
 *
 * Cog runs a job under our generation id; it keeps nothing of a run that ended, and a PUT of an ended id runs
 * it again, so nothing is PUT while Cog may still be retrying an end (docs/providers/cog.md): the runs that
 * ended while no process followed them are settled by the ends Cog retries, taken once the service is back.
 * The fake retries on Cog's schedule at 1/20 of its waits (10 ms doubling to 5.12 s), and the service is told
 * the window and gap that match.
 *
 * Two relays stand for the network: one at the service's public address (BASE_URL, where Cog posts), which
 * answers 503 while no process is up, and one in front of the container, which can lose an answer.
 * PROVIDER_POLL_MS is short (the follow's ticks); only webhooks and, after a gap, one PUT move the jobs.
 */
const storage = await durableStorage(t, 'gs-cog-crash-');
const SECRET = 'cog-webhook-secret-of-at-least-32-characters';
const fake = await startCogFake({ slots: 10, requiredInputs: ['prompt'], model: () => ({ hold: true }), webhookRetryScale: 0.05 });
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
      PROVIDER_POLL_MS: '200',
      // Cog's window (409.4 s) and gap (102.4 s + a try's 30 s) at the fake's 1/20: 20.5 s and 5.1 s, with margins.
      COG_WEBHOOK_RETRY_WINDOW_MS: '22000',
      COG_WEBHOOK_RETRY_GAP_MS: '6500',
    },
    redisPrefix,
  );
  front.target = served.url;
  return served;
}

const withDb = <T>(fn: Parameters<typeof withDatabase<T>>[1]) => withDatabase(storage, fn);

const until = async (what: string, check: () => boolean): Promise<void> => void (await eventually(check, { timeoutMs: 20_000, what }));
const webhooksOf = (id: string) => fake.webhooksSent.filter((w) => w.id === id).map((w) => [w.status, w.answer]);

t.test('after kill -9 at every phase of a Cog job, each settles; one run per job; the money is exact', async (t) => {
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
  // Another such PUT; this run will end while the service is down.
  const lostEnded = await create('PUT lost, ended while the service was down');
  await until(
    "the second lost PUT's run at Cog",
    () => webhooksOf(lostEnded).length === 1 && toCog.seen.some((r) => r.method === 'PUT' && r.path === `/predictions/${lostEnded}`),
  );

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
      [lostEnded, 'reserved', null],
    ],
    "the accepted jobs' ids written before the kill; the job whose PUT got no answer has none",
  );

  // While the service is down, two runs end at Cog: their ends are refused (503 at the public address), and Cog
  // retries them on its schedule; Cog forgets the runs themselves at once.
  fake.finish(finished, { output: [dataUrl('image/png', makePng(23, 23))] });
  fake.finish(lostEnded, { output: [dataUrl('image/png', makePng(25, 25))] });
  const refused = (id: string) => webhooksOf(id).filter(([s, answer]) => s === 'succeeded' && (answer === 503 || answer === 0)).length;
  await until('ends refused while the service is down', () => refused(finished) >= 2 && refused(lostEnded) >= 2);
  t.notOk(fake.inFlight(finished) || fake.inFlight(lostEnded), 'Cog keeps nothing of them');

  const second = await serve();
  const again = second.client;
  const statusAgain = (id: string, wanted: string) => waitFor(again, key, user.workspaceId, id, (g) => g.status === wanted, wanted);
  // The ends Cog kept retrying reach the service once it is back: those two settle with nothing PUT.
  for (const id of [finished, lostEnded]) await statusAgain(id, 'succeeded');
  t.ok(refused(finished) < 13 && refused(lostEnded) < 13, 'each taken within the retries');
  // The runs still going are followed; the one whose PUT got no answer waits a gap for an event, then is PUT and joins.
  for (const id of [starting, processing, inFlight]) await statusAgain(id, 'running');
  for (const [id, size] of [
    [starting, 21],
    [processing, 22],
    [inFlight, 24],
  ] as const) {
    fake.finish(id, { output: [dataUrl('image/png', makePng(size, size))] });
  }
  const all = [starting, processing, finished, inFlight, lostEnded];
  const done: Gen[] = [];
  for (const id of all) done.push(await waitFor(again, key, user.workspaceId, id, isTerminal, 'a terminal state'));
  t.same(
    done.map((g) => g.status),
    ['succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded'],
    JSON.stringify(done.map((g) => [g.status, g.errorCode, g.errorMessage])),
  );
  for (const g of done) t.equal(g.outputAssetIds.length, 1, `${g.id}: its image stored`);

  const runs = all.map((id) => fake.runs.get(id));
  t.same(runs, [1, 1, 1, 1, 1], `one run per job at every phase: ${JSON.stringify(runs)}`);
  t.equal(fake.puts.get(finished), 1, 'ended while down: nothing PUT after the restart');
  t.equal(fake.puts.get(lostEnded), 1, 'PUT lost and ended while down: adopted from its end, not PUT again');
  t.ok((fake.puts.get(processing) ?? 0) <= 2, 'processing at the kill: at most one probe, a gap after the restart, which joined its run');
  t.equal(fake.cancels.size, 0, 'nothing started that had to be cancelled');
  const followed = done.map((g) => g.timeline.some((e) => e.detail === 'followed at its provider after a restart'));
  t.same(followed, [true, true, true, false, false], 'the accepted ones were followed, never submitted as new jobs');
  for (const g of [done[3]!, done[4]!]) {
    t.ok(
      g.timeline.some((e) => /^resubmitted after a restart/.test(e.detail ?? '')),
      'the job with no provider id was handed over again',
    );
  }

  second.child.proc.kill('SIGTERM');
  await second.child.exited;
  await withDb(async (query) => {
    const money = await moneyOf(query, user.workspaceId);
    const left = PLAN_CREDITS - 5 * 7;
    t.same(
      money,
      { available: left, reserved: 0, ledgerAvailable: left, ledgerReserved: 0, reservations: [] },
      '5 × 7 credits captured once each; nothing left reserved; the ledger agrees',
    );
    const ledger = await ledgerByGeneration(query, user.workspaceId);
    for (const id of all) t.same(ledger[id], { reserve: 1, capture: 1 }, `${id}: reserved once, captured once`);
  });
});

import t from 'tap';
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { PLAN_CREDITS, providerCatalogFile } from '../helpers/provider-catalog.ts';
import { answerThenKill, roundsOf, serveDurable, withDatabase } from './crash-support.ts';
import { eventually } from '../helpers/eventually.ts';
import { png, SECRET, startReplicateFake, TOKEN, VERSION } from '../fakes/replicate.ts';
import { createGeneration, isTerminal, moneyOf, waitFor, type Gen } from '../generations/flow.ts';

/**
 * The submission window at Replicate: kill -9 of the real server from 0 to 50 ms after Replicate answered a
 * job's create, so that for some jobs the prediction id was not yet written. After the restart such a job
 * is handed over again; its create's webhook URL carried its own id and token, so the prediction's events
 * name it, and the job adopts that prediction instead of creating a second one (docs/providers/replicate.md).
 * Replicate posts webhooks only to HTTPS addresses, so BASE_URL is a public HTTPS name and this test delivers
 * the fake's signed webhooks (the prediction as it is, signed as Replicate signs) to the path and query the
 * create named, on the service's loopback address. The fake counts creates per job: one each.
 */
const storage = await durableStorage(t, 'gs-replicate-window-');
const fake = await startReplicateFake({ token: TOKEN, webhookSecret: SECRET });
t.teardown(() => fake.close());
fake.scenario(`version:${VERSION}`, { advance: 'manual', end: { status: 'succeeded', output: [fake.file('w.png', png(12, 8))] } });

const catalogFile = providerCatalogFile(t, [
  {
    id: 'acme/painter',
    mode: 'text_to_image',
    credits: 7,
    parameters: { prompt: { required: true } },
    deployment: { id: 'painter-replicate', provider: 'replicate', target: { version: VERSION } },
  },
]);
const redisPrefix = `gs-replicate-window-${randomBytes(4).toString('hex')}:`;

function serve() {
  return serveDurable(
    t,
    storage,
    catalogFile,
    {
      BASE_URL: 'https://gen.example.com',
      REPLICATE_API_TOKEN: TOKEN,
      REPLICATE_BASE_URL: fake.baseUrl,
      REPLICATE_WEBHOOK_SECRET: SECRET,
      REPLICATE_RESUBMIT_GRACE_MS: '20000',
      PROVIDER_POLL_MS: '100',
    },
    redisPrefix,
  );
}

/**
 * Milliseconds from Replicate's answer to the kill; SWEEP=0,5,... overrides them. Each round's jobs are created
 * at once, their answers held by the fake and sent at staggered times before one kill: one process per round.
 */
const DELAYS_MS = (process.env.SWEEP ?? '0,0,1,2,5,10,20,35,50').split(',').map(Number);
const ROUNDS = roundsOf(DELAYS_MS, 5);
t.setTimeout(1_200_000);

t.test('kill -9 from 0 to 50 ms after Replicate answered a create: one create per job', { timeout: 1_200_000 }, async (t) => {
  let current = await serve();
  const user = await signUp(current.client);
  const { key } = await createKey(current.client, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const jobs: Array<{ id: string; prompt: string; delay: number; written: boolean }> = [];

  for (const [round, delays] of ROUNDS.entries()) {
    fake.holdAnswers(true);
    const before = fake.creates.length;
    const started: Array<{ id: string; prompt: string; delay: number }> = [];
    for (const [index, delay] of delays.entries()) {
      const prompt = `round ${round}, job ${index}, killed ${delay} ms after its answer`;
      const created = await createGeneration(current.client, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/painter', params: { prompt } });
      t.equal(created.status, 201, JSON.stringify(created.body));
      started.push({ id: created.body.id as string, prompt, delay });
    }
    await eventually(() => fake.creates.length === before + delays.length, { what: `the round's ${delays.length} creates at Replicate`, timeoutMs: 30_000 });
    const createOf = (prompt: string) => fake.creates.find((c) => (c.body.input as { prompt?: string }).prompt === prompt)!;
    await answerThenKill(
      current.child,
      started.map((job) => ({ delayMs: job.delay, send: () => fake.answer(createOf(job.prompt).predictionId) })),
    );
    fake.holdAnswers(false);
    await withDatabase(storage, async (query) => {
      for (const job of started) {
        const [row] = await query<{ provider_job_id: string | null }>('select provider_job_id from generations where id = ?', [job.id]);
        jobs.push({ ...job, written: row?.provider_job_id != null });
      }
    });

    current = await serve();
    // Replicate goes on: each prediction starts and ends, and each event is posted to the URL its create named.
    for (const job of started) {
      const create = createOf(job.prompt);
      const hook = new URL(String(create.body.webhook));
      const deliver = async () => {
        const { headers, body } = fake.webhook(create.predictionId);
        const answer = await request(`${current.url}${hook.pathname}${hook.search}`, { method: 'POST', headers, body });
        await answer.body.dump();
        t.equal(answer.statusCode, 200, 'the event was taken');
      };
      fake.advance(create.predictionId);
      await deliver();
      while (fake.prediction(create.predictionId)?.status !== 'succeeded') fake.advance(create.predictionId);
      await deliver();
    }
    for (const job of started) {
      const done: Gen = await waitFor(current.client, key, user.workspaceId, job.id, isTerminal, 'a terminal state');
      t.equal(done.status, 'succeeded', `${job.prompt}: ${JSON.stringify([done.errorCode, done.errorMessage])}`);
    }
  }

  const creates = jobs.map((job) => fake.submissions(job.prompt));
  const lost = jobs.filter((job) => !job.written).length;
  t.comment(`creates per job by kill delay: ${JSON.stringify(jobs.map((job, i) => [job.delay, job.written ? 'id written' : 'id lost', creates[i]]))}`);
  t.same(creates, Array(jobs.length).fill(1), `one create per job, ${lost} of ${jobs.length} killed before the prediction id was written`);
  t.ok(lost > 0, 'the window was hit: some kills came before the prediction id was written');
  for (const job of jobs.filter((j) => !j.written)) {
    const g = await waitFor(current.client, key, user.workspaceId, job.id, isTerminal, 'terminal');
    t.ok(
      g.timeline.some((e) => /^resubmitted after a restart/.test(e.detail ?? '')),
      `${job.prompt}: handed over again (and adopted from its events: one create)`,
    );
  }

  current.child.proc.kill('SIGTERM');
  await current.child.exited;
  await withDatabase(storage, async (query) => {
    const left = PLAN_CREDITS - jobs.length * 7;
    t.same(
      await moneyOf(query, user.workspaceId),
      { available: left, reserved: 0, ledgerAvailable: left, ledgerReserved: 0, reservations: [] },
      'each job captured once; the ledger agrees',
    );
  });
});

import t from 'tap';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { PLAN_CREDITS, providerCatalogFile } from '../helpers/provider-catalog.ts';
import { startRelay } from '../helpers/relay.ts';
import { answerThenKill, roundsOf, serveDurable, withDatabase } from './crash-support.ts';
import { eventually } from '../helpers/eventually.ts';
import { startFakeFal } from '../fakes/fal.ts';
import { createGeneration, isTerminal, moneyOf, waitFor, type Gen } from '../generations/flow.ts';

/**
 * The submission window at fal: kill -9 of the real server from 0 to 50 ms after fal answered a job's
 * submission, so that for some jobs the request id was not yet written. After the restart such a job is
 * handed over again; its `fal_webhook` URL carried its own id and token, so the end of the request fal
 * already took names it, and the job adopts that request instead of submitting a second one
 * (docs/providers/fal.md). The fake counts submissions per job: one each, whatever the kill's timing.
 * The public address is a relay (503 while no process is up), so fal's webhooks reach each new process.
 */
const storage = await durableStorage(t, 'gs-fal-window-');
const KEY = 'fake-key-id-0011:fake-key-secret-window0123456789';
const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const JWKS = JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'fal-window-1', use: 'sig', alg: 'EdDSA' }] });
let served = 0;
const fake = await startFakeFal({
  key: KEY,
  signingKey: privateKey,
  endpoints: {
    'fal-ai/flux/dev': {
      required: ['prompt'],
      result: (_input, f) => ({ images: [{ url: f.host(`w-${++served}.png`, makePng(9, 9)), content_type: 'image/png', width: 9, height: 9 }], seed: 1 }),
    },
  },
});
t.teardown(() => fake.close());
const front = await startRelay(t);

const catalogFile = providerCatalogFile(t, [
  {
    id: 'acme/flux',
    mode: 'text_to_image',
    credits: 5,
    parameters: { prompt: { required: true } },
    deployment: { id: 'flux-fal', provider: 'fal', target: { endpoint: 'fal-ai/flux/dev' } },
  },
]);
const redisPrefix = `gs-fal-window-${randomBytes(4).toString('hex')}:`;

async function serve() {
  const served = await serveDurable(
    t,
    storage,
    catalogFile,
    {
      BASE_URL: front.url,
      FAL_KEY: KEY,
      FAL_QUEUE_URL: fake.url,
      FAL_WEBHOOK_JWKS: JWKS,
      FAL_RESUBMIT_GRACE_MS: '20000',
      PROVIDER_POLL_MS: '100',
    },
    redisPrefix,
  );
  front.target = served.url;
  return served;
}

/**
 * Milliseconds from fal's answer to the kill; SWEEP=0,5,... overrides them. Each round's jobs are submitted at
 * once, their answers held by the fake and sent at staggered times before one kill: one process per round.
 */
const DELAYS_MS = (process.env.SWEEP ?? '0,0,1,2,5,10,20,35,50').split(',').map(Number);
const ROUNDS = roundsOf(DELAYS_MS, 5);
t.setTimeout(1_200_000);

t.test('kill -9 from 0 to 50 ms after fal answered a submission: one submission per job', { timeout: 1_200_000 }, async (t) => {
  let current = await serve();
  const user = await signUp(current.client);
  const { key } = await createKey(current.client, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const jobs: Array<{ id: string; prompt: string; delay: number; requestId: string; written: boolean }> = [];

  for (const [round, delays] of ROUNDS.entries()) {
    fake.script({ hold: true }, true);
    fake.holdAnswers(true);
    const before = fake.submissions;
    const started: Array<{ id: string; prompt: string; delay: number }> = [];
    for (const [index, delay] of delays.entries()) {
      const prompt = `round ${round}, job ${index}, killed ${delay} ms after its answer`;
      const created = await createGeneration(current.client, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/flux', params: { prompt } });
      t.equal(created.status, 201, JSON.stringify(created.body));
      started.push({ id: created.body.id as string, prompt, delay });
    }
    await eventually(() => fake.submissions === before + delays.length, { what: `the round's ${delays.length} submissions at fal`, timeoutMs: 30_000 });
    const requestOf = (prompt: string) => [...fake.requests.values()].find((r) => r.input.prompt === prompt)!.id;
    await answerThenKill(
      current.child,
      started.map((job) => ({ delayMs: job.delay, send: () => fake.answer(requestOf(job.prompt)) })),
    );
    front.target = undefined;
    fake.holdAnswers(false);
    await withDatabase(storage, async (query) => {
      for (const job of started) {
        const [row] = await query<{ provider_job_id: string | null }>('select provider_job_id from generations where id = ?', [job.id]);
        jobs.push({ ...job, requestId: requestOf(job.prompt), written: row?.provider_job_id != null });
      }
    });

    current = await serve();
    // fal goes on: each request a job submitted completes, and its end is posted to the URL the submission named.
    for (const job of jobs.slice(-started.length)) await fake.advance(job.requestId, 'COMPLETED');
    for (const job of jobs.slice(-started.length)) {
      const done: Gen = await waitFor(current.client, key, user.workspaceId, job.id, isTerminal, 'a terminal state');
      t.equal(done.status, 'succeeded', `${job.prompt}: ${JSON.stringify([done.errorCode, done.errorMessage])}`);
    }
  }

  const submissions = jobs.map((job) => [...fake.requests.values()].filter((r) => r.input.prompt === job.prompt).length);
  const lost = jobs.filter((job) => !job.written).length;
  t.comment(`submissions per job by kill delay: ${JSON.stringify(jobs.map((job, i) => [job.delay, job.written ? 'id written' : 'id lost', submissions[i]]))}`);
  t.same(submissions, Array(jobs.length).fill(1), `one submission per job, ${lost} of ${jobs.length} killed before the request id was written`);
  t.ok(lost > 0, 'the window was hit: some kills came before the request id was written');
  for (const job of jobs.filter((j) => !j.written)) {
    const g = await waitFor(current.client, key, user.workspaceId, job.id, isTerminal, 'terminal');
    t.ok(
      g.timeline.some((e) => /^resubmitted after a restart/.test(e.detail ?? '')),
      `${job.prompt}: handed over again (and adopted from its end: one submission)`,
    );
  }

  current.child.proc.kill('SIGTERM');
  await current.child.exited;
  await withDatabase(storage, async (query) => {
    const left = PLAN_CREDITS - jobs.length * 5;
    t.same(
      await moneyOf(query, user.workspaceId),
      { available: left, reserved: 0, ledgerAvailable: left, ledgerReserved: 0, reservations: [] },
      'each job captured once; the ledger agrees',
    );
  });
});

import t from 'tap';
import { PROVIDER_ERROR_CODES, type AdapterUpdate } from '../../providers/adapter.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { createOpenAiAdapter, OPENAI_RESUME_LOST } from '../../providers/openai/adapter.ts';
import { jobFor, recorder, startFakeOpenAi, testContext, type FakeOpenAi } from '../fakes/openai.ts';
import { eventually } from '../helpers/eventually.ts';

let fake: FakeOpenAi;
t.before(async () => {
  fake = await startFakeOpenAi();
});
t.teardown(() => fake.close());

const adapterFor = (model = 'gpt-4o-mini', maxConcurrentJobs?: number) =>
  createOpenAiAdapter(
    { apiKey: fake.apiKey, baseUrl: fake.url, ...(maxConcurrentJobs ? { maxConcurrentJobs } : {}) },
    { id: 'openai-test', target: { model } },
    testContext(),
  );

/** Lets pending timers and I/O run, so that an update that should not come would have come. */
const settle = (ms = 100) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitUntil(check: () => boolean, timeoutMs = 20_000) {
  await eventually(check, { timeoutMs });
}

t.test('cancel before the request went out: nothing is sent, nothing reported', async (t) => {
  const adapter = adapterFor();
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text'), rec.report);
  await adapter.cancel(providerJobId);
  await settle();
  t.same(rec.updates, []);
  t.equal(fake.submissions.get(providerJobId), undefined, 'never submitted');
  await adapter.close();
});

t.test('cancel while the request is in flight: the request is aborted, no outcome reported', async (t) => {
  const adapter = adapterFor();
  const rec = recorder();
  fake.next('/chat/completions', { kind: 'hang' });
  const before = fake.closedEarly();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text'), rec.report);
  await waitUntil(() => fake.submissions.get(providerJobId) === 1);
  await adapter.cancel(providerJobId);
  await waitUntil(() => fake.closedEarly() > before);
  await settle();
  t.same(
    rec.updates.map((u) => u.type),
    ['running'],
    'no failed or succeeded after the cancel',
  );
  await adapter.close();
});

t.test('cancel while waiting out a 429: the wait ends, no second submission', async (t) => {
  const adapter = adapterFor();
  const rec = recorder();
  fake.next('/chat/completions', { kind: 'rate-limit', retryAfter: '5' });
  const { providerJobId } = await adapter.submit(jobFor('text_to_text', {}, {}, 20_000), rec.report);
  await waitUntil(() => rec.updates.some((u) => u.type === 'progress'));
  await adapter.cancel(providerJobId);
  await settle();
  t.equal(fake.submissions.get(providerJobId), 1);
  t.same(
    rec.updates.map((u) => u.type),
    ['running', 'progress'],
  );
  await adapter.close();
});

t.test('cancel after the end, or of an unknown id, does nothing and does not throw', async (t) => {
  const adapter = adapterFor();
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text'), rec.report);
  await rec.ended;
  await adapter.cancel(providerJobId);
  await adapter.cancel('openai_00000000-0000-0000-0000-000000000000');
  await settle(30);
  t.same(
    rec.updates.filter((u) => u.type !== 'output').map((u) => u.type),
    ['running', 'succeeded'],
  );
  await adapter.close();
});

t.test('resume after a crash: the job fails with the named code, nothing is submitted again', async (t) => {
  const crashed = adapterFor();
  fake.next('/chat/completions', { kind: 'hang' });
  const first = recorder();
  const job = jobFor('text_to_text');
  const { providerJobId } = await crashed.submit(job, first.report);
  await waitUntil(() => fake.submissions.get(providerJobId) === 1);
  // Another process (or this one after a restart) holds only the id.
  const restarted = adapterFor();
  const rec = recorder();
  restarted.resume(providerJobId, job, rec.report);
  const end = (await rec.ended) as Extract<AdapterUpdate, { type: 'failed' }>;
  t.equal(end.type, 'failed');
  t.equal(end.errorCode, OPENAI_RESUME_LOST.code);
  t.equal(end.errorCode, PROVIDER_ERROR_CODES.error);
  t.match(end.errorMessage, providerJobId);
  t.match(end.errorMessage, /in flight when the service stopped/);
  await settle();
  t.equal(fake.submissions.get(providerJobId), 1, 'the fake saw one submission only');
  t.equal(rec.updates.length, 1, 'one terminal update');
  await crashed.close();
  await restarted.close();
});

t.test('resume of a job still in flight in this process follows it to its end', async (t) => {
  const adapter = adapterFor();
  fake.next('/chat/completions', { kind: 'rate-limit', retryAfterMs: '80' });
  const first = recorder();
  const job = jobFor('text_to_text');
  const { providerJobId } = await adapter.submit(job, first.report);
  await waitUntil(() => fake.submissions.get(providerJobId) === 1);
  const rec = recorder();
  adapter.resume(providerJobId, job, rec.report);
  const end = await rec.ended;
  t.equal(end.type, 'succeeded');
  t.equal(fake.submissions.get(providerJobId), 2, 'the 429 and its retry; no new submission by resume');
  t.notOk(
    first.updates.some((u) => u.type === 'succeeded'),
    'the outcome goes to the new follower',
  );
  await adapter.close();
});

t.test('close aborts what is in flight and reports nothing more; the concurrency limit is exposed', async (t) => {
  const adapter = adapterFor('gpt-4o-mini', 3);
  t.equal(adapter.kind, 'openai');
  t.equal(adapter.maxConcurrentJobs, 3);
  fake.next('/chat/completions', { kind: 'hang' });
  const before = fake.closedEarly();
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text'), rec.report);
  await waitUntil(() => fake.submissions.get(providerJobId) === 1);
  await adapter.close();
  await waitUntil(() => fake.closedEarly() > before);
  await settle();
  t.same(
    rec.updates.map((u) => u.type),
    ['running'],
  );
  const late = await adapter
    .submit(jobFor('text_to_text'), () => undefined)
    .then(
      () => undefined,
      (e: { code: string }) => e.code,
    );
  t.equal(late, PROVIDER_ERROR_CODES.unavailable, 'a closed adapter takes no job');
});

t.test('many jobs at once each end once, with their own answers', async (t) => {
  const adapter = adapterFor();
  const recs = Array.from({ length: 8 }, () => recorder());
  await Promise.all(recs.map((rec, i) => adapter.submit(jobFor('text_to_text', { prompt: `job ${i}` }), rec.report)));
  const ends = await Promise.all(recs.map((rec) => rec.ended));
  t.same(
    ends.map((e) => (e as { textOutput?: string }).textOutput),
    recs.map((_, i) => `echo: job ${i}`),
  );
  await settle(30);
  t.ok(recs.every((rec) => rec.updates.filter((u) => u.type === 'succeeded' || u.type === 'failed').length === 1));
  await adapter.close();
});

t.test("the job's 429 waits and its deadline are the follower's, on the context's clock: the request out at the deadline is aborted", async (t) => {
  const clock = new ManualClock(Date.now());
  const adapter = createOpenAiAdapter(
    { apiKey: fake.apiKey, baseUrl: fake.url },
    { id: 'openai-test', target: { model: 'gpt-4o-mini', stream: false } },
    testContext({ now: () => clock.now(), clock }),
  );
  fake.next('/chat/completions', { kind: 'rate-limit', retryAfter: '5' });
  fake.next('/chat/completions', { kind: 'hang' });
  const before = fake.closedEarly();
  const rec = recorder();
  const job = { ...jobFor('text_to_text'), deadline: clock.now() + 8_000 };
  const { providerJobId } = await adapter.submit(job, rec.report);
  await waitUntil(() => rec.updates.some((u) => u.type === 'progress'));
  await settle(50);
  t.equal(fake.submissions.get(providerJobId), 1, 'the 429 is waited out on the clock, not in real time');
  clock.advance(5_000);
  await waitUntil(() => fake.submissions.get(providerJobId) === 2);
  clock.advance(2_999);
  await settle(50);
  t.same(rec.terminals(), [], 'not before the deadline');
  clock.advance(1);
  const end = (await rec.ended) as Extract<AdapterUpdate, { type: 'failed' }>;
  t.equal(end.errorCode, PROVIDER_ERROR_CODES.rateLimited, 'a call that went out after a 429 wait fails as that 429');
  await waitUntil(() => fake.closedEarly() > before);
  t.pass('the request in flight was aborted');
  t.same(
    rec.updates.map((u) => u.type),
    ['running', 'progress', 'failed'],
  );

  fake.next('/chat/completions', { kind: 'hang' });
  const hung = recorder();
  const second = await adapter.submit({ ...jobFor('text_to_text'), deadline: clock.now() + 8_000 }, hung.report);
  await waitUntil(() => fake.submissions.get(second.providerJobId) === 1);
  clock.advance(8_000);
  const timedOut = (await hung.ended) as Extract<AdapterUpdate, { type: 'failed' }>;
  t.equal(timedOut.errorCode, PROVIDER_ERROR_CODES.timeout);
  t.match(timedOut.errorMessage, /did not answer within \d+ ms/);
  t.equal(clock.pendingTimers(), 0, 'no timer left on the clock');
  await adapter.close();
});

import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import type { AdapterContext, AdapterJob, AdapterUpdate, ProviderAdapter } from '../../providers/adapter.ts';
import { createCogAdapter } from '../../providers/cog/adapter.ts';
import type { CogDeploymentTarget } from '../../providers/cog/deployment.ts';
import type { CogSettings } from '../../providers/cog/settings.ts';
import { encodePng } from '../../providers/local/png.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import type { Mode } from '../../domain/catalog/models.ts';
import { guardedFetcher } from '../../runtime/egress.ts';
import { makeWav } from '../helpers/files.ts';
import { dataUrl, startCogFake, startEventsRoute, type CogFake, type CogFakeKnobs, type EventsRoute } from '../fakes/cog.ts';
import { eventually } from '../helpers/eventually.ts';

const SECRET = 'cog-webhook-secret-of-the-tests-0123456789';

async function png(width: number, height: number): Promise<Buffer> {
  return encodePng(width, height, new Uint8Array(width * height * 3).fill(200));
}

interface Harness {
  fake: CogFake;
  route: EventsRoute;
  settings: CogSettings;
  context: AdapterContext;
  adapter(options?: { context?: Partial<AdapterContext>; target?: CogDeploymentTarget; settings?: Partial<CogSettings> }): ProviderAdapter;
}

/** Cog's retry waits times 1/100: 2 ms doubling to 1 024 ms, 4 094 ms in all; the adapter's window and gap to match, with margins. */
const SCALE = 0.01;
const SCALED = { webhookRetryWindowMs: 4_500, webhookRetryGapMs: 1_400 };

async function harness(t: Test, knobs: Partial<CogFakeKnobs> = {}): Promise<Harness> {
  const fake = await startCogFake({ webhookRetryScale: SCALE, ...knobs });
  const route = await startEventsRoute();
  // Cog's end-webhook retries at 1/100 of their real waits (the fake's knob), and the adapter's windows to match.
  const settings: CogSettings = { ...SCALED, baseUrl: fake.url, webhookSecret: SECRET, maxConcurrentJobs: 1, busyRetryMs: 20 };
  const context: AdapterContext = {
    fetchOutput: guardedFetcher({ allowAddress: (address) => address === '127.0.0.1', maxBytes: 64 * 1024, timeoutMs: 2_000 }),
    eventsUrl: route.url,
    maxResponseBytes: 1 << 20,
    maxOutputBytes: 64 * 1024,
    // The backstop re-PUT only where a test is about it: a re-PUT landing between a run's end and its
    // webhook starts a second run (as Cog does), which would make run counts depend on timing.
    pollIntervalMs: 60_000,
    requestTimeoutMs: 400,
    now: () => Date.now(),
  };
  const adapters: ProviderAdapter[] = [];
  t.teardown(async () => {
    for (const adapter of adapters) await adapter.close();
    await fake.close();
    await route.close();
  });
  return {
    fake,
    route,
    settings,
    context,
    adapter(options = {}) {
      const adapter = createCogAdapter(
        { ...settings, ...options.settings },
        { id: 'cog-test', target: options.target ?? {} },
        { ...context, ...options.context },
      );
      adapters.push(adapter);
      route.adapter = adapter;
      return adapter;
    },
  };
}

function job(mode: Mode, input: Record<string, unknown> = { prompt: 'an onion with sunglasses' }, extra: Partial<AdapterJob> = {}): AdapterJob {
  return {
    generationId: `gen_${randomUUID().replace(/-/g, '')}`,
    mode,
    modelId: 'cog/test',
    params: {},
    input,
    inputs: { images: [], videos: [] },
    deadline: Date.now() + 10_000,
    ...extra,
  };
}

/** Collects a job's updates; `end()` resolves with its terminal update (the guard time only stops a hung test). */
function recorder() {
  const updates: AdapterUpdate[] = [];
  let wake = () => {};
  const report = (update: AdapterUpdate) => {
    updates.push(update);
    wake();
  };
  const until = async (done: (updates: AdapterUpdate[]) => boolean, guardMs = 5_000) => {
    const stop = Date.now() + guardMs;
    while (!done(updates)) {
      if (Date.now() > stop) throw new Error(`no such update after ${guardMs} ms: ${JSON.stringify(updates)}`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 20);
      });
    }
  };
  const terminal = () => updates.filter((update) => update.type === 'succeeded' || update.type === 'failed');
  const end = async () => {
    await until(() => terminal().length > 0);
    return terminal()[0]!;
  };
  return { updates, report, until, terminal, end };
}

t.test('text_to_image: PUT with the generation id, followed by webhooks, the data URL decoded', async (t) => {
  const image = await png(8, 6);
  const h = await harness(t, { model: () => ({ output: [dataUrl('image/png', image)] }) });
  const adapter = h.adapter();
  const j = job('text_to_image');
  const r = recorder();
  const { providerJobId } = await adapter.submit(j, r.report);
  t.equal(providerJobId, j.generationId, 'the prediction id is the generation id');
  const end = await r.end();
  t.equal(end.type, 'succeeded');
  if (end.type !== 'succeeded') return;
  t.equal(end.files.length, 1);
  const file = end.files[0]!;
  t.equal(sniffContentType(file.bytes), 'image/png');
  t.same(imageDimensions(file.bytes), { width: 8, height: 6 });
  t.match(file, { contentType: 'image/png', mediaType: 'image', width: 8, height: 6 });
  t.same(r.updates.filter((u) => u.type === 'running').length, 1, 'running once, from the start webhook');
  t.ok(r.updates.findIndex((u) => u.type === 'running') < r.updates.indexOf(end), 'running before the end');

  t.equal(h.fake.runs.get(j.generationId), 1, 'one run');
  t.equal(h.fake.puts.get(j.generationId), 1, 'one PUT: webhooks followed it, no backstop needed');
  const put = h.fake.requests.find((request) => request.method === 'PUT')!;
  t.equal(put.path, `/predictions/${j.generationId}`);
  t.equal(put.headers.prefer, 'respond-async');
  t.equal(put.headers['content-type'], 'application/json');
  t.same(h.fake.inputs.get(j.generationId)?.input, { prompt: 'an onion with sunglasses' }, 'the mapped input as sent');
  t.same(
    h.route.accepted.map((event) => event.providerJobId),
    [j.generationId, j.generationId],
    'start and completed, verified',
  );
  t.same(h.route.refused, []);
});

t.test('text_to_text: a list of strings (a yielding model) is joined into textOutput; a plain string is kept', async (t) => {
  const h = await harness(t, { model: (input) => ({ output: input.stream ? ['Onions', ' bloom', ' softly'] : 'One onion.' }) });
  const adapter = h.adapter();
  const streamed = recorder();
  await adapter.submit(job('text_to_text', { prompt: 'haiku', stream: true }), streamed.report);
  t.match(await streamed.end(), { type: 'succeeded', textOutput: 'Onions bloom softly', files: [] });
  const plain = recorder();
  await adapter.submit(job('text_to_text', { prompt: 'one line' }), plain.report);
  t.match(await plain.end(), { type: 'succeeded', textOutput: 'One onion.', files: [] });
  const notText = await startCogFakeJob(t, 'text_to_text', { output: { a: 1 } });
  t.match(notText, { type: 'failed', errorCode: 'provider_bad_response' });
});

/** One job against a fresh fake whose model answers `run`; the terminal update. */
async function startCogFakeJob(t: Test, mode: Mode, run: Record<string, unknown>, context: Partial<AdapterContext> = {}) {
  const h = await harness(t, { model: () => run });
  const r = recorder();
  await h.adapter({ context }).submit(job(mode), r.report);
  return r.end();
}

t.test('text_to_audio: a WAV data URL becomes an audio file', async (t) => {
  const end = await startCogFakeJob(t, 'text_to_audio', { output: dataUrl('audio/wav', makeWav()) });
  t.equal(end.type, 'succeeded');
  if (end.type !== 'succeeded') return;
  const file = end.files[0]!;
  t.equal(file.bytes.subarray(0, 4).toString('latin1'), 'RIFF');
  t.equal(file.bytes.subarray(8, 12).toString('latin1'), 'WAVE');
  t.match(file, { contentType: 'audio/wav', mediaType: 'audio' });
});

t.test("image_to_image: the input image goes to the deployment's input as a data URL; the output is decoded", async (t) => {
  const source = await png(4, 4);
  const result = await png(16, 9);
  const h = await harness(t, { fileInputs: ['init_image'], requiredInputs: ['prompt', 'init_image'], model: () => ({ output: dataUrl('image/png', result) }) });
  const adapter = h.adapter({ target: { imageInput: 'init_image' } });
  const j = job('image_to_image', { prompt: 'sharper', strength: 0.6 }, { inputs: { images: [{ bytes: source, contentType: 'image/png' }], videos: [] } });
  const r = recorder();
  await adapter.submit(j, r.report);
  const end = await r.end();
  t.equal(end.type, 'succeeded');
  const got = h.fake.inputs.get(j.generationId)!;
  t.ok(Buffer.compare(got.files.init_image!.bytes, source) === 0, "the model got the input image's bytes");
  t.equal(got.files.init_image!.contentType, 'image/png');
  t.equal(got.input.strength, 0.6, 'the mapped input rides along');
  if (end.type === 'succeeded') t.same(imageDimensions(end.files[0]!.bytes), { width: 16, height: 9 });
});

t.test("an input the model requires and did not get: submit throws provider_input_rejected with Cog's words", async (t) => {
  const h = await harness(t, { requiredInputs: ['prompt', 'seed'] });
  const error = await h
    .adapter()
    .submit(job('text_to_image'), recorder().report)
    .catch((e: unknown) => e);
  t.match(error, { name: 'ProviderFailure', code: 'provider_input_rejected', message: /422.*body\.input\.seed: Field required/ });
  t.equal(h.fake.runs.size, 0, 'nothing ran');
});

t.test('an uploaded output (--upload-url) is fetched through the egress guard; an expired one fails the job', async (t) => {
  const image = await png(5, 5);
  const h = await harness(t, {
    model: (_input, id) => {
      h.fake.uploads.set(`${id}.png`, image);
      return { output: `${h.fake.url}/uploads/${id}.png` };
    },
  });
  const adapter = h.adapter();
  const ok = recorder();
  await adapter.submit(job('text_to_image'), ok.report);
  const end = await ok.end();
  t.match(end, { type: 'succeeded', files: [{ contentType: 'image/png', width: 5, height: 5 }] });

  h.fake.knobs.model = () => ({ output: `${h.fake.url}/uploads/expired.png` });
  const expired = recorder();
  await adapter.submit(job('text_to_image'), expired.report);
  t.match(await expired.end(), { type: 'failed', errorCode: 'provider_output_fetch_failed', errorMessage: /404/ });

  const blocked = recorder();
  h.fake.knobs.model = () => ({ output: 'http://10.0.0.1/secret.png' });
  await adapter.submit(job('text_to_image'), blocked.report);
  t.match(await blocked.end(), { type: 'failed', errorCode: 'provider_output_fetch_failed' }, 'a private address is refused by the guard');
});

t.test('outputs over the limit fail: a data URL as a bad response, a URL as a failed fetch', async (t) => {
  const big = Buffer.concat([await png(2, 2), Buffer.alloc(70 * 1024)]);
  const inline = await startCogFakeJob(t, 'text_to_image', { output: dataUrl('image/png', big) });
  t.match(inline, { type: 'failed', errorCode: 'provider_bad_response', errorMessage: /larger than 65536 bytes/ });

  const h = await harness(t, { model: () => ({ output: `${h.fake.url}/uploads/big.png` }) });
  h.fake.uploads.set('big.png', big);
  const r = recorder();
  await h.adapter().submit(job('text_to_image'), r.report);
  t.match(await r.end(), { type: 'failed', errorCode: 'provider_output_fetch_failed' });

  const notImage = await startCogFakeJob(t, 'text_to_image', { output: dataUrl('image/png', Buffer.from('not a picture')) });
  t.match(notImage, { type: 'failed', errorCode: 'provider_bad_response' }, 'bytes that are no image');
  const text = await startCogFakeJob(t, 'text_to_image', { output: 'just words' });
  t.match(text, { type: 'failed', errorCode: 'provider_bad_response', errorMessage: /no image file/ });
});

t.test("a model that raised: failed with provider_error and the model's message", async (t) => {
  const end = await startCogFakeJob(t, 'text_to_image', { error: 'CUDA out of memory' });
  t.match(end, { type: 'failed', errorCode: 'provider_error', errorMessage: /The model failed: CUDA out of memory/ });
});

t.test('409 while every slot is busy: the job waits and is taken once the slot frees', async (t) => {
  const h = await harness(t, { model: (input) => (input.prompt === 'first' ? { hold: true } : { output: 'done' }) });
  const adapter = h.adapter();
  const first = job('text_to_text', { prompt: 'first' });
  await adapter.submit(first, recorder().report);
  const second = job('text_to_text', { prompt: 'second' });
  const r = recorder();
  const submitted = adapter.submit(second, r.report);
  await r.until((updates) => updates.some((u) => u.type === 'progress' && /409.*At capacity/.test(u.detail)));
  t.notOk(h.fake.runs.has(second.generationId), 'not started while busy');
  h.fake.finish(first.generationId, { output: 'one' });
  t.same(await submitted, { providerJobId: second.generationId });
  t.match(await r.end(), { type: 'succeeded', textOutput: 'done' });
  t.equal(h.fake.runs.get(second.generationId), 1);
  t.ok((h.fake.puts.get(second.generationId) ?? 0) >= 2, 'PUT again after the 409');
});

t.test("409 until the deadline: submit fails with provider_rate_limited and Cog's words", async (t) => {
  const h = await harness(t, { model: () => ({ hold: true }) });
  const adapter = h.adapter();
  await adapter.submit(job('text_to_text'), recorder().report);
  const error = await adapter.submit(job('text_to_text', {}, { deadline: Date.now() + 150 }), recorder().report).catch((e: unknown) => e);
  t.match(error, { code: 'provider_rate_limited', message: /409.*At capacity - all prediction slots busy/ });
});

t.test('503 while setup runs: the job waits for the model to be ready', async (t) => {
  const h = await harness(t, { ready: false, model: () => ({ output: 'ready now' }) });
  const adapter = h.adapter();
  const r = recorder();
  const submitted = adapter.submit(job('text_to_text'), r.report);
  await r.until((updates) => updates.some((u) => u.type === 'progress' && /503.*Setup has not finished/.test(u.detail)));
  h.fake.knobs.ready = true;
  await submitted;
  t.match(await r.end(), { type: 'succeeded', textOutput: 'ready now' });
  const late = await harness(t, { ready: false });
  const error = await late
    .adapter()
    .submit(job('text_to_text', {}, { deadline: Date.now() + 100 }), recorder().report)
    .catch((e: unknown) => e);
  t.match(error, { code: 'provider_unavailable', message: /503/ });
});

t.test('429 with Retry-After (a proxy in front of Cog): the job waits, then is taken; past the deadline it fails', async (t) => {
  const h = await harness(t, { model: () => ({ output: 'after the wait' }) });
  h.fake.knobs.putAnswers.push({ status: 429, headers: { 'retry-after': '0.05' }, body: '{"detail":"slow down"}' });
  const adapter = h.adapter();
  const j = job('text_to_text');
  const r = recorder();
  await adapter.submit(j, r.report);
  t.match(await r.end(), { type: 'succeeded', textOutput: 'after the wait' });
  t.ok(
    r.updates.some((u) => u.type === 'progress' && /429/.test(u.detail)),
    'the wait is on the timeline',
  );
  t.notOk(
    r.updates.some((u) => u.type === 'failed'),
    'never failed while waiting',
  );
  t.equal(h.fake.puts.get(j.generationId), 2);
  t.equal(h.fake.runs.get(j.generationId), 1);

  h.fake.knobs.putAnswers.push({ status: 429, headers: { 'retry-after': '60' }, body: '{"detail":"slow down"}' });
  const error = await adapter.submit(job('text_to_text'), recorder().report).catch((e: unknown) => e);
  t.match(error, { code: 'provider_rate_limited', message: /429: slow down/ });
});

t.test('5xx, a hang, malformed JSON, an unreachable server, a server that is not Cog', async (t) => {
  const h = await harness(t);
  const adapter = h.adapter();
  const submitError = (j = job('text_to_text')) => adapter.submit(j, recorder().report).catch((e: unknown) => e);

  h.fake.knobs.putAnswers.push({ status: 500, body: '{"error":"worker crashed"}' });
  t.match(await submitError(), { code: 'provider_error', message: /500: worker crashed/ });
  h.fake.knobs.putAnswers.push({ status: 502, body: '<html>bad gateway</html>' });
  t.match(await submitError(), { code: 'provider_unavailable', message: /502/ });
  h.fake.knobs.putAnswers.push({ status: 202, body: '{"id": "x", "status": ' });
  t.match(await submitError(), { code: 'provider_bad_response' });

  const hung = job('text_to_text');
  h.fake.knobs.putAnswers.push('hang');
  t.match(await submitError(hung), { code: 'provider_timeout', message: /400 ms/ });
  await waitFor(() => h.fake.cancels.has(hung.generationId));
  t.pass('a PUT that timed out is followed by a cancel (it may have started the run)');

  const notCog = h.adapter({ target: { baseUrl: `${h.fake.url}/elsewhere` } });
  t.match(await notCog.submit(job('text_to_text'), recorder().report).catch((e: unknown) => e), { code: 'provider_error', message: /404.*Cog container/ });

  const gone = h.adapter({ settings: { baseUrl: 'http://127.0.0.1:1' } });
  t.match(await gone.submit(job('text_to_text'), recorder().report).catch((e: unknown) => e), { code: 'provider_unavailable' });
});

t.test("the webhook secret and a job's token never appear in a failure message", async (t) => {
  const h = await harness(t);
  const adapter = h.adapter({ settings: { webhookAuthToken: 'container-auth-token-0123456789' } });
  const j = job('text_to_text');
  const { jobToken } = await import('../../providers/cog/webhook.ts');
  const token = jobToken(SECRET, j.generationId);
  h.fake.knobs.putAnswers.push({
    status: 400,
    body: JSON.stringify({ error: `bad webhook ${h.route.url}?job=${j.generationId}&token=${token} secret=${SECRET} auth=container-auth-token-0123456789` }),
  });
  const error = (await adapter.submit(j, recorder().report).catch((e: unknown) => e)) as Error;
  t.match(error, { code: 'provider_input_rejected' });
  t.notMatch(error.message, token);
  t.notMatch(error.message, SECRET);
  t.notMatch(error.message, 'container-auth-token-0123456789');
  t.match(error.message, /\[redacted\]/);
});

async function waitFor(done: () => boolean, guardMs = 5_000): Promise<void> {
  await eventually(done, { timeoutMs: guardMs });
}

t.test('events: a wrong or missing token is refused; repeated and out-of-order webhooks leave one outcome', async (t) => {
  const h = await harness(t, { webhooks: 'duplicate', model: () => ({ output: 'twice told' }) });
  const adapter = h.adapter({ context: { pollIntervalMs: 60_000 } });
  const r = recorder();
  const j = job('text_to_text');
  await adapter.submit(j, r.report);
  t.match(await r.end(), { type: 'succeeded', textOutput: 'twice told' });
  await h.fake.settled(j.generationId);
  t.ok(h.route.duplicates >= 2, 'the repeats were recognised by their event id');
  t.equal(r.terminal().length, 1, 'one outcome');

  const body = Buffer.from(JSON.stringify({ id: j.generationId, status: 'succeeded', output: 'forged', logs: '', metrics: {} }));
  const event = (query: Record<string, string | undefined>) => ({ headers: { 'content-type': 'application/json' }, body, query, now: Date.now() });
  const { jobToken } = await import('../../providers/cog/webhook.ts');
  t.match(adapter.verifyEvent!(event({ job: j.generationId })), { ok: false, message: /no job or token/ });
  t.match(adapter.verifyEvent!(event({ job: j.generationId, token: 'ab'.repeat(32) })), { ok: false, message: /token is wrong/ });
  t.match(
    adapter.verifyEvent!(event({ job: 'gen_other', token: jobToken(SECRET, 'gen_other') })),
    { ok: false, message: /does not match/ },
    "another job's token",
  );
  t.match(adapter.verifyEvent!(event({ job: j.generationId, token: jobToken('another-secret-of-at-least-32-chars!!', j.generationId) })), { ok: false });
  t.match(adapter.verifyEvent!(event({ job: j.generationId, token: jobToken(SECRET, j.generationId) })), { ok: true, providerJobId: j.generationId });

  const ordered = await harness(t, { webhooks: 'completedFirst', model: () => ({ output: 'late start' }) });
  const late = ordered.adapter({ context: { pollIntervalMs: 60_000 } });
  const o = recorder();
  const k = job('text_to_text');
  await late.submit(k, o.report);
  await ordered.fake.settled(k.generationId);
  await waitFor(() => ordered.route.accepted.length === 2);
  t.match(o.terminal(), [{ type: 'succeeded', textOutput: 'late start' }]);
  t.notOk(
    o.updates.slice(o.updates.indexOf(o.terminal()[0]!)).some((u) => u.type === 'running'),
    'the start that came after the end changed nothing',
  );
});

t.test('events refused at the route: a forged webhook posted to the events URL never reaches the job', async (t) => {
  const h = await harness(t, { model: () => ({ hold: true }), webhookAuthToken: 'container-auth-token-0123456789' });
  const adapter = h.adapter({ settings: { webhookAuthToken: 'container-auth-token-0123456789' }, context: { pollIntervalMs: 60_000 } });
  const j = job('text_to_text');
  const r = recorder();
  await adapter.submit(j, r.report);
  await r.until((updates) => updates.some((u) => u.type === 'running'));
  const { request } = await import('undici');
  const { jobToken } = await import('../../providers/cog/webhook.ts');
  const forged = JSON.stringify({ id: j.generationId, status: 'failed', error: 'forged', logs: '', metrics: {} });
  const url = `${h.route.url}?job=${j.generationId}&token=${jobToken(SECRET, j.generationId)}`;
  const noAuth = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: forged });
  t.equal(noAuth.statusCode, 401, "the right token without the container's Authorization is refused");
  await noAuth.body.dump();
  const badToken = await request(`${h.route.url}?job=${j.generationId}&token=${'0'.repeat(64)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer container-auth-token-0123456789' },
    body: forged,
  });
  t.equal(badToken.statusCode, 401);
  await badToken.body.dump();
  h.fake.finish(j.generationId, { output: 'real' });
  t.match(await r.end(), { type: 'succeeded', textOutput: 'real' }, 'the real end, signed by the container');
  t.equal(h.route.refused.length, 2);
});

t.test(
  'no PUT after the first in normal operation: runs of 1, 2 and 3 poll intervals, end webhooks on time, repeated, out of order or retried by Cog: one run per job',
  async (t) => {
    const POLL = 40;
    const variants: Array<{ name: string; knobs: Partial<CogFakeKnobs>; refusals?: number }> = [
      { name: 'delivered', knobs: {} },
      { name: 'each twice', knobs: { webhooks: 'duplicate' } },
      { name: 'end before start', knobs: { webhooks: 'completedFirst' } },
      { name: 'the end refused twice, then retried by Cog', knobs: {}, refusals: 2 },
    ];
    for (const variant of variants) {
      for (const intervals of [1, 2, 3]) {
        const h = await harness(t, { ...variant.knobs, slots: 3, model: () => ({ output: 'once', durationMs: intervals * POLL }) });
        const adapter = h.adapter({ context: { pollIntervalMs: POLL }, settings: { maxConcurrentJobs: 3 } });
        const jobs = [job('text_to_text'), job('text_to_text'), job('text_to_text')];
        const records = jobs.map(() => recorder());
        if (variant.refusals) {
          // The start webhooks are taken; then the route answers 503 to the first ends, which Cog retries.
          h.route.adapter = adapter;
        }
        await Promise.all(jobs.map((j, i) => adapter.submit(j, records[i]!.report)));
        if (variant.refusals) h.route.answers.push(...Array<number>(variant.refusals * jobs.length).fill(503));
        for (const r of records) t.match(await r.end(), { type: 'succeeded', textOutput: 'once' }, `${variant.name}, ${intervals} poll intervals`);
        for (const j of jobs) await h.fake.settled(j.generationId);
        const runs = jobs.map((j) => h.fake.runs.get(j.generationId));
        const puts = jobs.map((j) => h.fake.puts.get(j.generationId));
        t.same(runs, [1, 1, 1], `${variant.name}, runs of ${intervals} poll intervals: one run per job`);
        t.same(puts, [1, 1, 1], 'one PUT per job: nothing asked Cog while its end could still come');
        t.equal(h.fake.cancels.size, 0, 'nothing to cancel');
        if (variant.refusals)
          t.ok(
            h.fake.webhooksSent.some((w) => w.answer === 503),
            'ends were refused and retried',
          );
      }
    }
  },
);

t.test('a lost start webhook: the job is asked about only after Cog’s retry window of silence; the probe joins the run (one run)', async (t) => {
  const h = await harness(t, { model: () => ({ hold: true }), loseWebhook: ({ status }) => status === 'processing' });
  const adapter = h.adapter({ context: { pollIntervalMs: 40 }, settings: { webhookRetryWindowMs: 300 } });
  const j = job('text_to_text');
  const r = recorder();
  await adapter.submit(j, r.report);
  await r.until((updates) => updates.some((u) => u.type === 'running'));
  t.equal(h.fake.puts.get(j.generationId), 2, 'the submit, and one probe after the window');
  const probe = h.fake.requests.filter((request) => request.method === 'PUT')[1];
  t.ok(probe, 'the probe was a PUT of the same id');
  h.fake.finish(j.generationId, { output: 'held and done' });
  t.match(await r.end(), { type: 'succeeded', textOutput: 'held and done' });
  t.equal(h.fake.runs.get(j.generationId), 1, 'the probe joined the run: exactly one run');
  t.equal(h.fake.cancels.get(j.generationId), undefined, 'nothing cancelled');
});

t.test('a probe that starts a run (Cog still retrying the end) cancels it at once; the end that comes after still settles the job', async (t) => {
  // The adapter told a window shorter than Cog's retries, so a probe lands while the end is being retried.
  const h = await harness(t, { webhookRetryScale: 1, model: () => ({ output: 'the first run', durationMs: 1 }) });
  const adapter = h.adapter({ context: { pollIntervalMs: 20 }, settings: { webhookRetryWindowMs: 100, webhookRetryGapMs: 5_000 } });
  const j = job('text_to_text');
  const r = recorder();
  h.route.answers.push(0, 503, 503); // the start taken, the end refused twice: Cog tries again after 200 ms, then 400 ms
  await adapter.submit(j, r.report);
  t.match(await r.end(), { type: 'succeeded', textOutput: 'the first run' }, "the first run's end, retried by Cog");
  t.equal(h.fake.runs.get(j.generationId), 2, 'the probe started a second run (Cog had forgotten the first)');
  await waitFor(() => h.fake.cancels.get(j.generationId) === 1);
  t.notOk(h.fake.inFlight(j.generationId), 'and it was cancelled at once');
  t.ok(
    r.updates.some((u) => u.type === 'progress' && /Cog has no run of this prediction/.test(u.detail)),
    'the timeline says so',
  );
});

t.test("webhooks that never arrive: after Cog's window the probe finds no run, cancels the one it started, and the job fails after one gap", async (t) => {
  const h = await harness(t, { model: () => ({ output: 'never heard', durationMs: 1 }), webhooks: 'drop' });
  const j = job('text_to_text');
  const r = recorder();
  await h.adapter({ context: { pollIntervalMs: 20 }, settings: { webhookRetryWindowMs: 100, webhookRetryGapMs: 100 } }).submit(j, r.report);
  t.match(await r.end(), { type: 'failed', errorCode: 'provider_error', errorMessage: /never reached this service/ });
  t.equal(h.fake.runs.get(j.generationId), 2, 'the first run, and the one the probe started');
  t.equal(h.fake.cancels.get(j.generationId), 1, 'which was cancelled at once');
});

t.test('resume after a crash with the run in flight: nothing is PUT; its end webhook ends it (one run); a probe after a gap joins it', async (t) => {
  const h = await harness(t, { model: () => ({ hold: true }) });
  const before = h.adapter();
  const j = job('text_to_image');
  await before.submit(j, recorder().report);
  await waitFor(() => h.fake.inFlight(j.generationId) && h.route.accepted.length === 1);
  await before.close(); // the process dies: nothing follows the job now

  const after = h.adapter({ context: { pollIntervalMs: 20 }, settings: { webhookRetryGapMs: 100 } });
  const r = recorder();
  after.resume(j.generationId, j, r.report);
  await r.until((updates) => updates.some((u) => u.type === 'running'));
  t.equal(h.fake.puts.get(j.generationId), 2, 'one PUT at submit, one probe a gap after the resume');
  t.equal(h.fake.runs.get(j.generationId), 1, 'the probe joined the run in flight');
  h.fake.finish(j.generationId, { output: dataUrl('image/png', await png(3, 2)) });
  t.match(await r.end(), { type: 'succeeded', files: [{ width: 3, height: 2 }] });
  t.equal(h.fake.runs.get(j.generationId), 1);
  t.equal(h.fake.cancels.get(j.generationId), undefined, 'nothing to cancel');
});

t.test('resume of a job whose run ended while no process followed it: the end Cog retries settles it (one run, no PUT)', async (t) => {
  for (const order of ['resumed first', 'end first'] as const) {
    const h = await harness(t, { model: () => ({ hold: true }) });
    const before = h.adapter();
    const j = job('text_to_text');
    await before.submit(j, recorder().report);
    await waitFor(() => h.route.accepted.length === 1);
    h.route.answers.push(...Array<number>(6).fill(503)); // the service is down: Cog's tries are refused
    await before.close();
    const after = h.adapter({ context: { pollIntervalMs: 20 } });
    const r = recorder();
    if (order === 'resumed first') after.resume(j.generationId, j, r.report);
    h.fake.finish(j.generationId, { output: `ran while down (${order})` });
    if (order === 'end first') {
      // The restarted service takes the end before the job is resumed: the adapter keeps it for the resume.
      await waitFor(() => h.route.accepted.length === 2);
      t.same(r.updates, []);
      after.resume(j.generationId, j, r.report);
    }
    t.match(await r.end(), { type: 'succeeded', textOutput: `ran while down (${order})` });
    t.equal(h.fake.webhooksSent.filter((w) => w.answer === 503).length, 6, 'the end refused six times, then taken');
    t.equal(h.fake.runs.get(j.generationId), 1, `${order}: one run`);
    t.equal(h.fake.puts.get(j.generationId), 1, 'nothing PUT after the restart');
  }
});

t.test('resume of a job whose run ended longer before than Cog retries: the probe finds no run and cancels the one it started; the job fails', async (t) => {
  const h = await harness(t, { webhookRetryScale: 0.001, model: () => ({ hold: true }) });
  const before = h.adapter();
  const j = job('text_to_text');
  await before.submit(j, recorder().report);
  await waitFor(() => h.route.accepted.length === 1);
  h.route.answers.push(...Array<number>(13).fill(503));
  await before.close();
  h.fake.finish(j.generationId, { output: 'lost' });
  await h.fake.settled(j.generationId);
  t.equal(h.fake.webhooksSent.filter((w) => w.status === 'succeeded').length, 13, 'the first try and 12 retries, all refused');
  const r = recorder();
  h.adapter({ context: { pollIntervalMs: 20 }, settings: { webhookRetryGapMs: 100 } }).resume(j.generationId, j, r.report);
  t.match(await r.end(), { type: 'failed', errorCode: 'provider_error', errorMessage: /never reached this service/ });
  t.equal(h.fake.runs.get(j.generationId), 2, 'the remaining window (docs): the probe started a run');
  t.equal(h.fake.cancels.get(j.generationId), 1, 'cancelled at once');
});

t.test('handed over again after a restart (its PUT reached Cog, the answer was lost): adopted from its events, not PUT again', async (t) => {
  const h = await harness(t, { model: (input) => (input.prompt === 'fresh' ? { output: 'fresh', durationMs: 1 } : { hold: true }) });
  const before = h.adapter();
  const j = job('text_to_text');
  await before.submit(j, recorder().report);
  await waitFor(() => h.route.accepted.length === 1);
  h.route.answers.push(503, 503, 503);
  await before.close();
  const after = h.adapter({ context: { pollIntervalMs: 20 } });
  const r = recorder();
  const submitted = after.submit({ ...j, afterRestart: true }, r.report);
  h.fake.finish(j.generationId, { output: 'adopted' });
  t.same(await submitted, { providerJobId: j.generationId });
  t.match(await r.end(), { type: 'succeeded', textOutput: 'adopted' });
  t.equal(h.fake.puts.get(j.generationId), 1, 'not PUT again');
  t.equal(h.fake.runs.get(j.generationId), 1);

  // Its PUT never reached Cog: nothing comes within a gap, and it is PUT then.
  const k = job('text_to_text', { prompt: 'fresh' });
  const q = recorder();
  await after.submit({ ...k, afterRestart: true }, q.report);
  t.match(await q.end(), { type: 'succeeded', textOutput: 'fresh' });
  t.equal(h.fake.puts.get(k.generationId), 1);
  t.equal(h.fake.runs.get(k.generationId), 1);
  t.ok(
    q.updates.some((u) => u.type === 'progress' && /Waiting up to/.test(u.detail)),
    'the wait is on the timeline',
  );
});

t.test('cancel in every state: waiting for a slot, starting, processing, ended, unknown; nothing throws', async (t) => {
  const h = await harness(t, { model: (input) => (input.prompt === 'hold' ? { hold: true } : { output: 'quick' }) });
  const adapter = h.adapter();

  const holding = job('text_to_text', { prompt: 'hold' });
  const r = recorder();
  await adapter.submit(holding, r.report);
  const waiting = job('text_to_text', { prompt: 'hold' });
  const waitingSubmit = adapter.submit(waiting, recorder().report).catch((e: unknown) => e);
  await waitFor(() => (h.fake.puts.get(waiting.generationId) ?? 0) >= 1);
  await adapter.cancel(waiting.generationId);
  t.match(await waitingSubmit, { code: 'provider_cancelled' }, 'a job waiting for a slot stops waiting');
  t.equal(h.fake.cancels.get(waiting.generationId), 1, 'and Cog is told (404: it never ran)');
  t.notOk(h.fake.runs.has(waiting.generationId));

  await adapter.cancel(holding.generationId);
  t.equal(h.fake.cancels.get(holding.generationId), 1);
  t.notOk(h.fake.inFlight(holding.generationId), 'the run in flight was canceled at Cog');
  await h.fake.settled(holding.generationId);
  t.same(r.terminal(), [], 'a cancelled job reports no outcome of its own');
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(h.fake.runs.get(holding.generationId), 1, 'no backstop PUT brought it back');

  const starting = job('text_to_text', { prompt: 'hold' });
  await adapter.submit(starting, recorder().report);
  await adapter.cancel(starting.generationId);
  t.notOk(h.fake.inFlight(starting.generationId), 'canceled while starting');

  const done = job('text_to_text', { prompt: 'quick' });
  const d = recorder();
  await adapter.submit(done, d.report);
  await d.end();
  await adapter.cancel(done.generationId);
  await adapter.cancel('gen_never_seen');
  t.equal(h.fake.cancels.get('gen_never_seen'), 1, 'unknown ids are answered 404 and nothing throws');

  const gone = h.adapter({ settings: { baseUrl: 'http://127.0.0.1:1' } });
  await gone.cancel('gen_unreachable');
  t.pass('an unreachable Cog does not throw either');
});

t.test('the deadline passes while the model runs: provider_timeout, and the run is cancelled', async (t) => {
  const h = await harness(t, { model: () => ({ hold: true }) });
  const j = job('text_to_text', {}, { deadline: Date.now() + 150 });
  const r = recorder();
  await h.adapter({ context: { pollIntervalMs: 40 } }).submit(j, r.report);
  t.match(await r.end(), { type: 'failed', errorCode: 'provider_timeout' });
  await waitFor(() => h.fake.cancels.get(j.generationId) === 1);
  t.equal(h.fake.runs.get(j.generationId), 1);
});

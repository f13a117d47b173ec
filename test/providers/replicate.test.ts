import t from 'tap';
import type { AdapterUpdate } from '../../providers/adapter.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { adapterFor, jobFor, mp4, png, recorder, sleep, startReplicateFake, TOKEN, VERSION, wav, type ReplicateFake } from '../fakes/replicate.ts';
import { eventually } from '../helpers/eventually.ts';

let fake: ReplicateFake;
t.before(async () => {
  fake = await startReplicateFake({ token: TOKEN });
});
t.teardown(() => fake.close());

const succeeded = (update: AdapterUpdate) => {
  if (update.type !== 'succeeded') throw new Error(`expected succeeded, got ${JSON.stringify(update)}`);
  return update;
};
const failed = (update: AdapterUpdate) => {
  if (update.type !== 'failed') throw new Error(`expected failed, got ${JSON.stringify(update)}`);
  return update;
};

/** Rejects with the ProviderFailure submit threw, or fails the test when it resolved. */
async function refusal(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!error) throw new Error('submit resolved; it should have thrown');
  return error as { code: string; message: string };
}

t.test('what works', async (t) => {
  t.test('text_to_text by model: streamed tokens joined, usage kept, running and log lines reported, Cancel-After sent', async (t) => {
    fake.scenario('model:meta/llama-test', {
      processingPolls: 3,
      logs: ['Loading weights', 'Prompt has 12 tokens', 'Generated 5 tokens'],
      end: { status: 'succeeded', output: ['Hello', ',', ' wor', 'ld', '!'], metrics: { input_token_count: 12, output_token_count: 5 } },
    });
    const adapter = adapterFor(fake, { model: 'meta/llama-test' });
    const rec = recorder();
    const job = jobFor({ mode: 'text_to_text', deadline: Date.now() + 90_500 });
    const { providerJobId } = await adapter.submit(job, rec.report);
    const end = succeeded(await rec.ended);
    t.equal(end.textOutput, 'Hello, world!');
    t.same(end.files, []);
    t.same(end.usage, { inputTokens: 12, outputTokens: 5 });
    t.equal(rec.updates.filter((u) => u.type === 'running').length, 1, 'running once');
    const progress = rec.updates.filter((u) => u.type === 'progress').map((u) => (u as { detail: string }).detail);
    t.ok(progress.length >= 2, 'log lines reported as progress');
    t.equal(new Set(progress).size, progress.length, 'only when they change');
    t.match(progress[progress.length - 1], /Generated 5 tokens/);

    const create = fake.creates.find((c) => c.predictionId === providerJobId)!;
    t.equal(create.path, '/v1/models/meta/llama-test/predictions');
    t.same(create.body, { input: job.input }, 'no version, no webhook without an events URL');
    t.equal(create.headers.authorization, `Bearer ${TOKEN}`);
    t.match(create.headers['cancel-after'], /^(90|91)s$/, 'the deadline as whole seconds');
    t.equal(create.headers.prefer, undefined, 'asynchronous: no Prefer: wait');
    await adapter.close();
  });

  t.test('text_to_image by version: a PNG copied and typed, with its size', async (t) => {
    const url = fake.file('cat.png', png(64, 48));
    fake.scenario(`version:${VERSION}`, { end: { status: 'succeeded', output: [url] } });
    const adapter = adapterFor(fake, { version: VERSION });
    const rec = recorder();
    const { providerJobId } = await adapter.submit(jobFor(), rec.report);
    const [file] = succeeded(await rec.ended).files;
    t.equal(file?.contentType, 'image/png');
    t.equal(file?.mediaType, 'image');
    t.equal(sniffContentType(file!.bytes), 'image/png');
    t.same(imageDimensions(file!.bytes), { width: 64, height: 48 });
    t.same([file?.width, file?.height], [64, 48]);
    const create = fake.creates.find((c) => c.predictionId === providerJobId)!;
    t.equal(create.path, '/v1/predictions');
    t.equal(create.body.version, VERSION);
    await adapter.close();
  });

  t.test('image_to_image by deployment: the input image sent as a data URL in the named field', async (t) => {
    const input = png(32, 32);
    const url = fake.file('restyled.png', png(32, 32));
    fake.scenario('deployment:acme/restyle', { end: { status: 'succeeded', output: url } });
    const adapter = adapterFor(fake, { deployment: 'acme/restyle', files: { image: 'input_image' } });
    const rec = recorder();
    const job = jobFor({ mode: 'image_to_image', inputs: { images: [{ bytes: input, contentType: 'image/png' }], videos: [] } });
    const { providerJobId } = await adapter.submit(job, rec.report);
    const [file] = succeeded(await rec.ended).files;
    t.equal(file?.contentType, 'image/png');
    const create = fake.creates.find((c) => c.predictionId === providerJobId)!;
    t.equal(create.path, '/v1/deployments/acme/restyle/predictions');
    const sent = (create.body.input as Record<string, string>).input_image!;
    t.match(sent, /^data:image\/png;base64,/);
    t.ok(Buffer.from(sent.split(',')[1]!, 'base64').equals(input), 'the bytes we were given');
    t.equal((create.body.input as Record<string, unknown>).prompt, job.input.prompt, 'the mapped input kept');
    await adapter.close();
  });

  t.test('text_to_video: an MP4 output', async (t) => {
    const url = fake.file('clip.mp4', mp4());
    fake.scenario('model:acme/video', { end: { status: 'succeeded', output: url } });
    const adapter = adapterFor(fake, { model: 'acme/video' });
    const rec = recorder();
    await adapter.submit(jobFor({ mode: 'text_to_video' }), rec.report);
    const [file] = succeeded(await rec.ended).files;
    t.equal(file?.mediaType, 'video');
    t.equal(file?.contentType, 'video/mp4');
    t.equal(file!.bytes.subarray(4, 8).toString('latin1'), 'ftyp', 'the MP4 container');
    await adapter.close();
  });

  t.test('text_to_audio: a WAV output inside an object', async (t) => {
    const url = fake.file('tune.wav', wav());
    fake.scenario('model:acme/audio', { end: { status: 'succeeded', output: { audio_out: url } } });
    const adapter = adapterFor(fake, { model: 'acme/audio' });
    const rec = recorder();
    await adapter.submit(jobFor({ mode: 'text_to_audio' }), rec.report);
    const [file] = succeeded(await rec.ended).files;
    t.equal(file?.mediaType, 'audio');
    t.equal(file?.contentType, 'audio/wav');
    t.equal(file!.bytes.subarray(0, 4).toString('latin1'), 'RIFF');
    t.equal(file!.bytes.subarray(8, 12).toString('latin1'), 'WAVE');
    await adapter.close();
  });

  t.test('several images in one output array', async (t) => {
    const urls = [fake.file('a.png', png(10, 20)), fake.file('b.png', png(30, 40))];
    fake.scenario('model:acme/batch', { end: { status: 'succeeded', output: urls } });
    const adapter = adapterFor(fake, { model: 'acme/batch' });
    const rec = recorder();
    await adapter.submit(jobFor(), rec.report);
    t.same(
      succeeded(await rec.ended).files.map((f) => [f.width, f.height]),
      [
        [10, 20],
        [30, 40],
      ],
    );
    await adapter.close();
  });

  t.test('a 429 with Retry-After on create: the job waits, says so, then is accepted once', async (t) => {
    const url = fake.file('after-wait.png', png(8, 8));
    fake.scenario('model:acme/busy', { end: { status: 'succeeded', output: url } });
    fake.misbehave('create', { status: 429, retryAfter: '0.2' });
    const adapter = adapterFor(fake, { model: 'acme/busy' });
    const rec = recorder();
    const job = jobFor();
    await adapter.submit(job, rec.report);
    t.match((rec.updates[0] as { detail?: string }).detail, /rate limit/i, 'the wait is in the timeline');
    succeeded(await rec.ended);
    t.equal(fake.submissions(job.input.prompt as string), 1, 'one prediction made');
    await adapter.close();
  });

  t.test('a 5xx while polling is passed over; the job still ends', async (t) => {
    const url = fake.file('flaky.png', png(8, 8));
    fake.scenario('model:acme/flaky', { end: { status: 'succeeded', output: url } });
    const adapter = adapterFor(fake, { model: 'acme/flaky' });
    fake.misbehave('get', { status: 503 }, { status: 502 });
    const rec = recorder();
    await adapter.submit(jobFor(), rec.report);
    succeeded(await rec.ended);
    t.equal(rec.terminals().length, 1);
    await adapter.close();
  });
});

t.test('what is refused, and why', async (t) => {
  t.test('a failed prediction keeps its error; NSFW wording is a content policy refusal', async (t) => {
    fake.scenario('model:acme/nsfw', { end: { status: 'failed', error: 'NSFW content detected. Try running it again, or try a different prompt.' } });
    fake.scenario('model:acme/raises', { end: { status: 'failed', error: 'CUDA out of memory. Tried to allocate 2.00 GiB' } });
    const nsfw = recorder();
    const raises = recorder();
    const a = adapterFor(fake, { model: 'acme/nsfw' });
    const b = adapterFor(fake, { model: 'acme/raises' });
    await a.submit(jobFor(), nsfw.report);
    await b.submit(jobFor(), raises.report);
    const policy = failed(await nsfw.ended);
    t.equal(policy.errorCode, 'provider_content_policy');
    t.match(policy.errorMessage, /NSFW content detected/);
    const error = failed(await raises.ended);
    t.equal(error.errorCode, 'provider_error');
    t.match(error.errorMessage, /CUDA out of memory/);
    await a.close();
    await b.close();
  });

  t.test('canceled or aborted at Replicate before the deadline: provider_cancelled; past it: provider_timeout', async (t) => {
    fake.scenario('model:acme/canceled', { end: { status: 'canceled' } });
    fake.scenario('model:acme/aborted', { startingPolls: 1, processingPolls: 1, end: { status: 'aborted' } });
    const adapter = adapterFor(fake, { model: 'acme/canceled' });
    const other = adapterFor(fake, { model: 'acme/aborted' });
    const one = recorder();
    const two = recorder();
    await adapter.submit(jobFor(), one.report);
    await other.submit(jobFor(), two.report);
    t.equal(failed(await one.ended).errorCode, 'provider_cancelled');
    t.equal(failed(await two.ended).errorCode, 'provider_cancelled');

    // The job's deadline passed: Replicate canceled it because of our Cancel-After.
    const late = recorder();
    let now = Date.now();
    const clocked = adapterFor(fake, { model: 'acme/canceled' }, { now: () => now });
    const job = jobFor({ deadline: now + 1_000 });
    await clocked.submit(job, (u) => {
      if (u.type === 'running') now = job.deadline;
      late.report(u);
    });
    const end = failed(await late.ended);
    t.equal(end.errorCode, 'provider_timeout');
    t.match(end.errorMessage, /deadline/);
    await Promise.all([adapter.close(), other.close(), clocked.close()]);
  });

  t.test('a 429 whose Retry-After passes the deadline: provider_rate_limited, nothing created', async (t) => {
    fake.scenario('model:acme/throttled', { end: { status: 'succeeded', output: 'x' } });
    fake.misbehave('create', { status: 429, retryAfter: '30' });
    const adapter = adapterFor(fake, { model: 'acme/throttled' });
    const job = jobFor({ deadline: Date.now() + 2_000 });
    const error = await refusal(adapter.submit(job, () => undefined));
    t.equal(error.code, 'provider_rate_limited');
    t.equal(fake.submissions(job.input.prompt as string), 0);
    await adapter.close();
  });

  t.test('5xx on create: 500 is provider_error, 503 provider_unavailable; the key never shows', async (t) => {
    fake.scenario('model:acme/down', { end: { status: 'succeeded', output: 'x' } });
    const adapter = adapterFor(fake, { model: 'acme/down' });
    fake.misbehave('create', { status: 500, body: JSON.stringify({ detail: `upstream saw Authorization: Bearer ${TOKEN} and ${TOKEN}`, status: 500 }) });
    const error = await refusal(adapter.submit(jobFor(), () => undefined));
    t.equal(error.code, 'provider_error');
    t.match(error.message, /500/);
    t.notMatch(error.message, TOKEN, 'the key is redacted');
    t.notMatch(error.message, TOKEN.slice(0, 12));
    fake.misbehave('create', { status: 503 });
    t.equal((await refusal(adapter.submit(jobFor(), () => undefined))).code, 'provider_unavailable');
    await adapter.close();
  });

  t.test("a wrong key: provider_auth_failed with Replicate's words and without the key", async (t) => {
    fake.scenario('model:acme/auth', { end: { status: 'succeeded', output: 'x' } });
    const adapter = adapterFor(fake, { model: 'acme/auth' }, {}, { apiToken: 'r8_WrongKeyWrongKeyWrongKey0000' });
    const error = await refusal(adapter.submit(jobFor(), () => undefined));
    t.equal(error.code, 'provider_auth_failed');
    t.match(error.message, /valid authentication token/);
    t.notMatch(error.message, 'r8_WrongKey');
    await adapter.close();
  });

  t.test('an unknown version: provider_input_rejected (422)', async (t) => {
    const adapter = adapterFor(fake, { version: 'f'.repeat(64) });
    const error = await refusal(adapter.submit(jobFor(), () => undefined));
    t.equal(error.code, 'provider_input_rejected');
    t.match(error.message, /Invalid version or not permitted/);
    await adapter.close();
  });

  t.test('no answer in time: provider_timeout', async (t) => {
    fake.scenario('model:acme/hangs', { end: { status: 'succeeded', output: 'x' } });
    fake.misbehave('create', { hang: true });
    const adapter = adapterFor(fake, { model: 'acme/hangs' });
    t.equal((await refusal(adapter.submit(jobFor(), () => undefined))).code, 'provider_timeout');
    await adapter.close();
  });

  t.test('malformed JSON: on create provider_bad_response; while polling, after three such answers', async (t) => {
    fake.scenario('model:acme/garbled', { end: { status: 'succeeded', output: 'x' } });
    const adapter = adapterFor(fake, { model: 'acme/garbled' });
    fake.misbehave('create', { malformed: true });
    t.equal((await refusal(adapter.submit(jobFor(), () => undefined))).code, 'provider_bad_response');
    fake.misbehave('get', { malformed: true }, { malformed: true }, { malformed: true });
    const rec = recorder();
    await adapter.submit(jobFor(), rec.report);
    t.equal(failed(await rec.ended).errorCode, 'provider_bad_response');
    await adapter.close();
  });

  t.test("Replicate unreachable while polling until past the deadline: the last failure's code, and a cancel sent", async (t) => {
    fake.scenario('model:acme/outage', { end: { status: 'succeeded', output: 'x' } });
    const adapter = adapterFor(fake, { model: 'acme/outage' }, { requestTimeoutMs: 100 });
    fake.misbehave('get', ...Array.from({ length: 200 }, () => ({ status: 503 })));
    const cancels = fake.counts.cancel;
    const rec = recorder();
    await adapter.submit(jobFor({ deadline: Date.now() + 300 }), rec.report);
    const end = failed(await rec.ended);
    t.equal(end.errorCode, 'provider_unavailable');
    t.match(end.errorMessage, /503/);
    await sleep(50);
    t.ok(fake.counts.cancel > cancels, 'asked Replicate to stop it');
    fake.calm();
    await adapter.close();
  });

  t.test('an output larger than allowed: provider_output_fetch_failed', async (t) => {
    const url = fake.file('huge.png', Buffer.concat([png(4, 4), Buffer.alloc(300 * 1024)]));
    fake.scenario('model:acme/huge', { end: { status: 'succeeded', output: url } });
    const adapter = adapterFor(fake, { model: 'acme/huge' });
    const rec = recorder();
    await adapter.submit(jobFor(), rec.report);
    t.equal(failed(await rec.ended).errorCode, 'provider_output_fetch_failed');
    await adapter.close();
  });

  t.test('an expired output URL (404): provider_output_fetch_failed', async (t) => {
    const url = fake.file('gone.png', png(4, 4));
    fake.removeFile('gone.png');
    fake.scenario('model:acme/expired', { end: { status: 'succeeded', output: [url] } });
    const adapter = adapterFor(fake, { model: 'acme/expired' });
    const rec = recorder();
    await adapter.submit(jobFor(), rec.report);
    const end = failed(await rec.ended);
    t.equal(end.errorCode, 'provider_output_fetch_failed');
    t.match(end.errorMessage, /404/);
    await adapter.close();
  });

  t.test('an output that is no media we know: provider_bad_response', async (t) => {
    const url = fake.file('notes.txt', Buffer.from('just some text, not an image'));
    fake.scenario('model:acme/text-file', { end: { status: 'succeeded', output: url } });
    const adapter = adapterFor(fake, { model: 'acme/text-file' });
    const rec = recorder();
    await adapter.submit(jobFor(), rec.report);
    t.equal(failed(await rec.ended).errorCode, 'provider_bad_response');
    await adapter.close();
  });

  t.test('an output URL the egress guard refuses: provider_output_fetch_failed', async (t) => {
    fake.scenario('model:acme/metadata', { end: { status: 'succeeded', output: 'http://169.254.169.254/latest/meta-data/' } });
    const adapter = adapterFor(fake, { model: 'acme/metadata' });
    const rec = recorder();
    await adapter.submit(jobFor(), rec.report);
    t.equal(failed(await rec.ended).errorCode, 'provider_output_fetch_failed');
    await adapter.close();
  });
});

t.test('cancel, in every state; nothing throws', async (t) => {
  fake.scenario('model:acme/slow', { advance: 'manual', end: { status: 'succeeded', output: 'x' } });
  const adapter = adapterFor(fake, { model: 'acme/slow' }, { pollIntervalMs: 50 });

  t.test('starting: the prediction is canceled, and the job reports nothing more', async (t) => {
    const rec = recorder();
    const { providerJobId } = await adapter.submit(jobFor(), rec.report);
    await adapter.cancel(providerJobId);
    t.equal(fake.prediction(providerJobId)?.status, 'canceled');
    await sleep(120);
    t.same(rec.terminals(), [], 'our own cancel is not reported back');
  });

  t.test('processing', async (t) => {
    const { providerJobId } = await adapter.submit(jobFor(), () => undefined);
    fake.advance(providerJobId);
    t.equal(fake.prediction(providerJobId)?.status, 'processing');
    await adapter.cancel(providerJobId);
    t.equal(fake.prediction(providerJobId)?.status, 'canceled');
  });

  t.test('succeeded: Replicate answers with the finished prediction, left as it is', async (t) => {
    const { providerJobId } = await adapter.submit(jobFor(), () => undefined);
    fake.advance(providerJobId);
    fake.advance(providerJobId);
    const cancels = fake.counts.cancel;
    await adapter.cancel(providerJobId);
    t.equal(fake.counts.cancel, cancels + 1, 'asked');
    t.equal(fake.prediction(providerJobId)?.status, 'succeeded');
  });

  t.test('an unknown prediction (404), a 500 and a hanging answer', async (t) => {
    await adapter.cancel('doesnotexist');
    fake.misbehave('cancel', { status: 500 }, { hang: true });
    await adapter.cancel('doesnotexist');
    await adapter.cancel('doesnotexist');
    t.pass('none threw');
  });

  t.teardown(() => adapter.close());
});

t.test('resume by provider job id: followed to its end, never submitted again', async (t) => {
  const url = fake.file('resumed.png', png(16, 16));
  fake.scenario('model:acme/resumable', { startingPolls: 2, processingPolls: 2, end: { status: 'succeeded', output: url } });
  const before = adapterFor(fake, { model: 'acme/resumable' }, { pollIntervalMs: 10_000 });
  const job = jobFor();
  const { providerJobId } = await before.submit(job, () => undefined);
  await before.close(); // the process died

  const after = adapterFor(fake, { model: 'acme/resumable' });
  const rec = recorder();
  after.resume(providerJobId, job, rec.report);
  const [file] = succeeded(await rec.ended).files;
  t.equal(file?.contentType, 'image/png');
  t.equal(fake.submissions(job.input.prompt as string), 1, 'one prediction, no second POST');
  t.ok(rec.updates.some((u) => u.type === 'running'));

  const lost = recorder();
  after.resume('neverexisted', job, lost.report);
  const end = failed(await lost.ended);
  t.equal(end.errorCode, 'provider_error');
  t.match(end.errorMessage, /neverexisted/);
  await after.close();
});

t.test('close stops following: no update after it', async (t) => {
  fake.scenario('model:acme/forever', { startingPolls: 1_000_000, end: { status: 'succeeded', output: 'x' } });
  const adapter = adapterFor(fake, { model: 'acme/forever' });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor(), rec.report);
  await sleep(60);
  await adapter.close();
  await sleep(30); // a poll already on the wire when close came may still land
  const gets = fake.counts.get;
  await sleep(100);
  t.equal(fake.counts.get, gets, 'no poll after close');
  t.same(rec.terminals(), []);
  t.equal(fake.prediction(providerJobId)?.status, 'starting', 'the job stays at the provider');
  rec.ended.catch(() => undefined);
});

t.test('a followed job whose provider cannot be reached says so once, and again once it answers', async (t) => {
  fake.scenario('model:acme/flaky', { advance: 'manual', end: { status: 'succeeded', output: 'made' } });
  const adapter = adapterFor(fake, { model: 'acme/flaky' }, { pollIntervalMs: 20 });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor({ mode: 'text_to_text' }), rec.report);
  const notes = () => rec.updates.filter((u) => u.type === 'progress').map((u) => (u as { detail: string }).detail);
  fake.misbehave('get', { status: 503, body: 'down' }, { status: 502 }, { status: 503 });
  // Unbounded before: the bound is the file's timeout.
  await eventually(() => notes().some((n) => /reached again/.test(n)), { timeoutMs: 180_000, everyMs: 20, what: 'reached again' });
  const down = notes().filter((n) => /cannot be reached since/.test(n));
  t.equal(down.length, 1, `said once while it failed: ${JSON.stringify(notes())}`);
  t.match(down[0], /Replicate cannot be reached since \d{4}-\d\d-\d\dT[^:]+:\d\d:\d\d\.\d{3}Z: .*503/);
  t.equal(notes().filter((n) => /reached again/.test(n)).length, 1, 'and once when it answered');
  fake.advance(providerJobId);
  fake.advance(providerJobId);
  t.match(await rec.ended, { type: 'succeeded', textOutput: 'made' }, 'followed to its end after all');
  await adapter.close();
});

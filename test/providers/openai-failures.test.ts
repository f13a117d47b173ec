import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { PROVIDER_ERROR_CODES, ProviderFailure, type AdapterUpdate } from '../../providers/adapter.ts';
import { createOpenAiAdapter } from '../../providers/openai/adapter.ts';
import type { OpenAiDeploymentTarget } from '../../providers/openai/deployment.ts';
import { imageDimensions } from '../../providers/local/sniff.ts';
import { makePng } from '../helpers/files.ts';
import { jobFor, recorder, startFakeOpenAi, testContext, type FakeOpenAi } from '../fakes/openai.ts';
import { eventually } from '../helpers/eventually.ts';

let fake: FakeOpenAi;
t.before(async () => {
  fake = await startFakeOpenAi();
});
t.teardown(() => fake.close());

function adapterFor(target: OpenAiDeploymentTarget, context = testContext(), apiKey = fake.apiKey, baseUrl = fake.url) {
  return createOpenAiAdapter({ apiKey, baseUrl }, { id: 'openai-test', target }, context);
}

const failed = (update: AdapterUpdate) => {
  if (update.type !== 'failed') throw new Error(`expected failed, got ${JSON.stringify(update).slice(0, 300)}`);
  return update;
};
const succeeded = (update: AdapterUpdate) => {
  if (update.type !== 'succeeded') throw new Error(`expected succeeded, got ${JSON.stringify(update).slice(0, 300)}`);
  return update;
};

/** Runs one job to its end and returns its updates and the submissions the fake counted for it. */
async function run(
  target: OpenAiDeploymentTarget,
  mode: Parameters<typeof jobFor>[0],
  params: Record<string, unknown> = {},
  options: { context?: ReturnType<typeof testContext>; deadlineMs?: number; inputs?: Parameters<typeof jobFor>[2] } = {},
) {
  const adapter = adapterFor(target, options.context);
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor(mode, params, options.inputs, options.deadlineMs), rec.report);
  const end = await rec.ended;
  await adapter.close();
  return { end, updates: rec.updates, submissions: fake.submissions.get(providerJobId) ?? 0 };
}

t.test('429 with Retry-After: the job waits, stays running, then succeeds', async (t) => {
  fake.next('/chat/completions', { kind: 'rate-limit', retryAfter: '0.05' });
  fake.next('/chat/completions', { kind: 'rate-limit', retryAfterMs: '40' });
  const { end, updates, submissions } = await run({ model: 'gpt-4o-mini' }, 'text_to_text');
  t.equal(succeeded(end).textOutput, 'echo: a lighthouse at dawn');
  t.equal(submissions, 3, 'two refused, the third answered');
  t.same(
    updates.filter((u) => u.type !== 'output').map((u) => u.type),
    ['running', 'progress', 'progress', 'succeeded'],
    'no failure, no second running',
  );
  t.ok(updates.findIndex((u) => u.type === 'output') > 2, 'the answer streamed after the waits');
  t.match((updates[1] as { detail: string }).detail, /429.*50 ms/);
  t.match((updates[2] as { detail: string }).detail, /429.*40 ms/, 'retry-after-ms read first');
});

t.test("429 whose wait passes the deadline fails with provider_rate_limited, keeping OpenAI's words", async (t) => {
  fake.next('/chat/completions', { kind: 'rate-limit', retryAfter: '30' });
  const { end, submissions } = await run({ model: 'gpt-4o-mini' }, 'text_to_text', {}, { deadlineMs: 2_000 });
  const failure = failed(end);
  t.equal(failure.errorCode, PROVIDER_ERROR_CODES.rateLimited);
  t.match(failure.errorMessage, /429 \(rate_limit_exceeded\): Rate limit reached for gpt-4o-mini/);
  t.equal(submissions, 1);
});

t.test("429s are waited out for at most the deployment's rateLimitAttempts calls, then provider_rate_limited", async (t) => {
  for (let i = 0; i < 3; i++) fake.next('/chat/completions', { kind: 'rate-limit', retryAfterMs: '10' });
  const { end, updates, submissions } = await run({ model: 'gpt-4o-mini' }, 'text_to_text', {}, { context: testContext({ rateLimitAttempts: 3 }) });
  t.equal(failed(end).errorCode, PROVIDER_ERROR_CODES.rateLimited, 'the third 429 is the failure');
  t.equal(submissions, 3, 'three calls, as the deployment allows');
  t.equal(updates.filter((u) => u.type === 'progress').length, 2, 'two waits, each on the timeline');
  // Without a cap of its own, a deployment takes the default number of calls.
  for (let i = 0; i < 2; i++) fake.next('/chat/completions', { kind: 'rate-limit', retryAfterMs: '10' });
  const { end: then } = await run({ model: 'gpt-4o-mini' }, 'text_to_text');
  t.equal(succeeded(then).textOutput, 'echo: a lighthouse at dawn', 'two 429s are within the default');
});

t.test('429 insufficient_quota is not waited out', async (t) => {
  fake.next('/images/generations', { kind: 'rate-limit', retryAfter: '0.02', code: 'insufficient_quota' });
  const { end, submissions } = await run({ model: 'dall-e-2' }, 'text_to_image');
  t.equal(failed(end).errorCode, PROVIDER_ERROR_CODES.rateLimited);
  t.match(failed(end).errorMessage, /exceeded your current quota/);
  t.equal(submissions, 1);
});

t.test('401: provider_auth_failed, and the key is in no message', async (t) => {
  const wrongKey = 'sk-wrong-key-0123456789abcdef';
  const adapter = adapterFor({ model: 'gpt-4o-mini' }, testContext(), wrongKey);
  const rec = recorder();
  await adapter.submit(jobFor('text_to_text'), rec.report);
  const failure = failed(await rec.ended);
  t.equal(failure.errorCode, PROVIDER_ERROR_CODES.authFailed);
  // upstreamMessage reads "Key provided" as a credential and redacts its next word; the rest stays OpenAI's.
  t.match(failure.errorMessage, /OpenAI answered 401 \(invalid_api_key\): Incorrect API key .*You can find your API key/);
  t.notMatch(failure.errorMessage, wrongKey);

  fake.next('/chat/completions', { kind: 'echo-key' });
  const echoed = await run({ model: 'gpt-4o-mini' }, 'text_to_text');
  t.equal(failed(echoed.end).errorCode, PROVIDER_ERROR_CODES.inputRejected);
  t.notOk(JSON.stringify(echoed.updates).includes(fake.apiKey), 'a server quoting the key back: redacted everywhere');
  t.match(failed(echoed.end).errorMessage, /\[redacted\]/);
});

t.test('400s: content policy (DALL·E, GPT image, chat filter) vs other refusals of the input', async (t) => {
  fake.next('/images/generations', { kind: 'content-policy' });
  const dalle = failed((await run({ model: 'dall-e-3' }, 'text_to_image')).end);
  t.equal(dalle.errorCode, PROVIDER_ERROR_CODES.contentPolicy);
  t.match(dalle.errorMessage, /content_policy_violation.*safety system/);

  fake.next('/images/edits', { kind: 'moderation-blocked' });
  const gpt = failed(
    (await run({ model: 'gpt-image-1' }, 'image_to_image', {}, { inputs: { images: [{ bytes: makePng(8, 8), contentType: 'image/png' }] } })).end,
  );
  t.equal(gpt.errorCode, PROVIDER_ERROR_CODES.contentPolicy);

  fake.next('/chat/completions', { kind: 'content-filter' });
  const chat = failed((await run({ model: 'gpt-4o-mini' }, 'text_to_text')).end);
  t.equal(chat.errorCode, PROVIDER_ERROR_CODES.contentPolicy);
  t.match(chat.errorMessage, /content_filter/);

  const many = failed((await run({ model: 'dall-e-3' }, 'text_to_image', { numImages: 2 })).end);
  t.equal(many.errorCode, PROVIDER_ERROR_CODES.inputRejected, 'dall-e-3 makes one image per request');
  t.match(many.errorMessage, /OpenAI answered 400 \(invalid_value\): You must provide n=1/);

  const jpegMask = { bytes: Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16]), contentType: 'image/jpeg' };
  const mask = failed(
    (await run({ model: 'gpt-image-1' }, 'image_to_image', {}, { inputs: { images: [{ bytes: makePng(8, 8), contentType: 'image/png' }], mask: jpegMask } }))
      .end,
  );
  t.equal(mask.errorCode, PROVIDER_ERROR_CODES.inputRejected);
  t.match(mask.errorMessage, /Invalid file 'mask'/);

  const model = failed((await run({ model: 'gpt-nonexistent' }, 'text_to_text')).end);
  t.equal(model.errorCode, PROVIDER_ERROR_CODES.inputRejected);
  t.match(model.errorMessage, /404 \(model_not_found\)/);
});

t.test('5xx: 500 is provider_error, 503 provider_unavailable', async (t) => {
  fake.next('/chat/completions', { kind: 'server-error' });
  const error = failed((await run({ model: 'gpt-4o-mini' }, 'text_to_text')).end);
  t.equal(error.errorCode, PROVIDER_ERROR_CODES.error);
  t.match(error.errorMessage, /500: The server had an error/);
  fake.next('/audio/speech', { kind: 'overloaded' });
  const busy = failed((await run({ model: 'tts-1' }, 'text_to_audio')).end);
  t.equal(busy.errorCode, PROVIDER_ERROR_CODES.unavailable);
  t.match(busy.errorMessage, /overloaded/);
  fake.next('/chat/completions', { kind: 'status', status: 502, text: '<html>Bad gateway</html>' });
  const gateway = failed((await run({ model: 'gpt-4o-mini' }, 'text_to_text')).end);
  t.equal(gateway.errorCode, PROVIDER_ERROR_CODES.unavailable);
  t.match(gateway.errorMessage, /Bad gateway/);
});

t.test('no answer in time: provider_timeout, and the request is closed', async (t) => {
  fake.next('/chat/completions', { kind: 'hang' });
  const before = fake.closedEarly();
  const { end } = await run({ model: 'gpt-4o-mini' }, 'text_to_text', {}, { context: testContext({ requestTimeoutMs: 200 }) });
  t.equal(failed(end).errorCode, PROVIDER_ERROR_CODES.timeout);
  await waitUntil(() => fake.closedEarly() > before);
  t.pass('the fake saw the connection closed');
});

t.test('the deadline bounds the call too', async (t) => {
  fake.next('/audio/speech', { kind: 'hang' });
  const { end } = await run({ model: 'tts-1' }, 'text_to_audio', {}, { deadlineMs: 250 });
  t.equal(failed(end).errorCode, PROVIDER_ERROR_CODES.timeout);
});

t.test('answers that are not what the API documents: provider_bad_response', async (t) => {
  fake.next('/chat/completions', { kind: 'malformed-json' });
  const malformed = failed((await run({ model: 'gpt-4o-mini' }, 'text_to_text')).end);
  t.equal(malformed.errorCode, PROVIDER_ERROR_CODES.badResponse);
  t.match(malformed.errorMessage, /not valid JSON/);

  fake.next('/chat/completions', { kind: 'malformed-json' });
  const unstreamed = failed((await run({ model: 'gpt-4o-mini', stream: false }, 'text_to_text')).end);
  t.equal(unstreamed.errorCode, PROVIDER_ERROR_CODES.badResponse);
  t.match(unstreamed.errorMessage, /not valid JSON/, 'an answer not streamed, too');

  fake.next('/chat/completions', { kind: 'status', status: 200, body: { id: 'x', object: 'chat.completion', choices: [] } });
  t.equal(failed((await run({ model: 'gpt-4o-mini', stream: false }, 'text_to_text')).end).errorCode, PROVIDER_ERROR_CODES.badResponse, 'no choices');
  fake.next('/chat/completions', { kind: 'status', status: 200, body: { id: 'x', object: 'chat.completion', choices: [] } });
  t.match(
    failed((await run({ model: 'gpt-4o-mini' }, 'text_to_text')).end),
    { errorCode: PROVIDER_ERROR_CODES.badResponse, errorMessage: /ended before its answer did/ },
    'a JSON answer to a streamed request: no event, no finish_reason',
  );

  fake.next('/chat/completions', {
    kind: 'status',
    status: 200,
    body: {
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 'many', completion_tokens: 3 },
    },
  });
  t.match(failed((await run({ model: 'gpt-4o-mini', stream: false }, 'text_to_text')).end).errorMessage, /usage/, 'a usage that cannot be read is not guessed');
  const chunk = (rest: Record<string, unknown>) => JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', ...rest });
  fake.next('/chat/completions', {
    kind: 'stream-events',
    events: [
      chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: null }),
      chunk({ choices: [], usage: { prompt_tokens: 'many', completion_tokens: 3 } }),
      '[DONE]',
    ],
  });
  const streamedUsage = await run({ model: 'gpt-4o-mini' }, 'text_to_text');
  t.match(failed(streamedUsage.end), { errorCode: PROVIDER_ERROR_CODES.badResponse, errorMessage: /usage/ }, 'nor in a stream');
  fake.next('/chat/completions', { kind: 'stream-events', events: [chunk({ id: 'c' }), '[DONE]'] });
  t.match(failed((await run({ model: 'gpt-4o-mini' }, 'text_to_text')).end).errorMessage, /chunk .* has no choices/, 'a chunk without choices');

  fake.next('/images/generations', { kind: 'fewer-images' });
  t.match(failed((await run({ model: 'dall-e-2' }, 'text_to_image', { numImages: 3 })).end).errorMessage, /2 of the 3 images/);

  fake.next('/images/generations', { kind: 'status', status: 200, body: { created: 1, data: [{ b64_json: Buffer.from('not an image').toString('base64') }] } });
  t.match(failed((await run({ model: 'dall-e-2' }, 'text_to_image')).end).errorMessage, /not a PNG, JPEG/);

  fake.next('/audio/speech', { kind: 'wrong-audio' });
  const audio = failed((await run({ model: 'tts-1' }, 'text_to_audio', { format: 'mp3' })).end);
  t.equal(audio.errorCode, PROVIDER_ERROR_CODES.badResponse);
  t.match(audio.errorMessage, /audio\/wav, not the audio\/mpeg asked for/);
});

t.test('answers larger than allowed: the JSON and the audio', async (t) => {
  const context = testContext({ maxResponseBytes: 256 * 1024, maxOutputBytes: 128 * 1024 });
  fake.next('/images/generations', { kind: 'oversized', bytes: 2 * 1024 * 1024 });
  const json = failed((await run({ model: 'dall-e-2' }, 'text_to_image', {}, { context })).end);
  t.equal(json.errorCode, PROVIDER_ERROR_CODES.badResponse);
  t.match(json.errorMessage, /larger than 262144 bytes/);
  fake.next('/audio/speech', { kind: 'oversized', bytes: 2 * 1024 * 1024 });
  const audio = failed((await run({ model: 'tts-1' }, 'text_to_audio', {}, { context })).end);
  t.match(audio.errorMessage, /larger than 131072 bytes/);
  const image = failed((await run({ model: 'gpt-image-1' }, 'text_to_image', {}, { context: testContext({ maxOutputBytes: 64 }) })).end);
  t.match(image.errorMessage, /larger than 64 bytes/, 'a decoded image over the output limit');
});

t.test('output URLs: an expired one is provider_output_fetch_failed; one over the size limit too', async (t) => {
  fake.next('/images/generations', { kind: 'image-urls', expired: true });
  const expired = failed((await run({ model: 'dall-e-3', imageResponseFormat: 'url' }, 'text_to_image')).end);
  t.equal(expired.errorCode, PROVIDER_ERROR_CODES.outputFetch);
  t.match(expired.errorMessage, /404/);
  const big = failed(
    (await run({ model: 'dall-e-3', imageResponseFormat: 'url' }, 'text_to_image', {}, { context: testContext({ maxOutputBytes: 100 }) })).end,
  );
  t.equal(big.errorCode, PROVIDER_ERROR_CODES.outputFetch);
  const guarded = testContext();
  guarded.fetchOutput = (url) => Promise.reject(new Error(`refused by the egress guard: ${new URL(url).host}`));
  const refused = failed((await run({ model: 'dall-e-3', imageResponseFormat: 'url' }, 'text_to_image', {}, { context: guarded })).end);
  t.equal(refused.errorCode, PROVIDER_ERROR_CODES.outputFetch, 'every URL goes through fetchOutput');
  fake.next('/images/generations', { kind: 'image-urls' });
  const ok = succeeded((await run({ model: 'dall-e-2' }, 'text_to_image')).end);
  t.same(imageDimensions(ok.files[0]!.bytes), { width: 1024, height: 1024 }, 'a server answering URLs despite b64_json');
});

t.test('nobody listening: provider_unavailable', async (t) => {
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const adapter = adapterFor({ model: 'gpt-4o-mini' }, testContext(), fake.apiKey, `http://127.0.0.1:${port}/v1`);
  const rec = recorder();
  await adapter.submit(jobFor('text_to_text'), rec.report);
  const failure = failed(await rec.ended);
  t.equal(failure.errorCode, PROVIDER_ERROR_CODES.unavailable);
  t.match(failure.errorMessage, /could not be reached/);
  await adapter.close();
});

t.test('refused before any call: submit throws a ProviderFailure', async (t) => {
  const cases: Array<[OpenAiDeploymentTarget, Parameters<typeof jobFor>[0], Record<string, unknown>, RegExp]> = [
    [{ model: 'gpt-4o-mini' }, 'text_to_video', {}, /does not make text_to_video/],
    [{ model: 'dall-e-2' }, 'text_to_image', { aspectRatio: '16:9' }, /no image size for the aspect ratio 16:9/],
    [{ model: 'gpt-image-1', sizes: { '1:1': '512x512' } }, 'text_to_image', { aspectRatio: '4:3' }, /no image size/],
    [{ model: 'gpt-image-1' }, 'image_to_image', {}, /at least one input image/],
  ];
  const before = fake.received.length;
  for (const [target, mode, params, message] of cases) {
    const adapter = adapterFor(target);
    const error = await adapter
      .submit(jobFor(mode, params), () => undefined)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    t.ok(error instanceof ProviderFailure, `${mode}: thrown`);
    t.equal((error as ProviderFailure).code, PROVIDER_ERROR_CODES.inputRejected);
    t.match((error as ProviderFailure).message, message);
    await adapter.close();
  }
  t.equal(fake.received.length, before, 'nothing was sent');
});

async function waitUntil(check: () => boolean, timeoutMs = 3_000) {
  await eventually(check, { timeoutMs });
}

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import OpenAI from 'openai';
import type { AdapterUpdate } from '../../providers/adapter.ts';
import { createOpenAiAdapter } from '../../providers/openai/adapter.ts';
import type { OpenAiDeploymentTarget } from '../../providers/openai/deployment.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { makePng } from '../helpers/files.ts';
import { ROOT } from '../fixtures/child.ts';
import { jobFor, recorder, startFakeOpenAi, testContext, type FakeOpenAi } from '../fakes/openai.ts';

let fake: FakeOpenAi;
t.before(async () => {
  fake = await startFakeOpenAi();
});
t.teardown(() => fake.close());

function adapterFor(target: OpenAiDeploymentTarget, context = testContext(), settings: { apiKey?: string; organization?: string } = {}) {
  return createOpenAiAdapter(
    { apiKey: settings.apiKey ?? fake.apiKey, baseUrl: fake.url, ...(settings.organization ? { organization: settings.organization } : {}) },
    { id: 'openai-test', target },
    context,
  );
}

const succeeded = (update: AdapterUpdate) => {
  if (update.type !== 'succeeded') throw new Error(`expected succeeded, got ${JSON.stringify(update)}`);
  return update;
};
const _failed = (update: AdapterUpdate) => {
  if (update.type !== 'failed') throw new Error(`expected failed, got ${JSON.stringify(update)}`);
  return update;
};
/** The error a call rejected with, matched against what OpenAI answers. */
async function refusedWith(t: Test, promise: Promise<unknown>, expected: Record<string, unknown>, message?: string) {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(error, message ?? 'refused');
  t.match(error, expected, message ?? 'as OpenAI answers');
}
const requestOf = (providerJobId: string) => fake.received.find((r) => r.headers['x-client-request-id'] === providerJobId)!;

t.test('the fake refuses what OpenAI refuses, checked with the official client', async (t) => {
  const client = new OpenAI({ apiKey: fake.apiKey, baseURL: fake.url, maxRetries: 0, logLevel: 'off' });
  const wrongKey = new OpenAI({ apiKey: 'sk-wrong-key-000000', baseURL: fake.url, maxRetries: 0, logLevel: 'off' });
  await refusedWith(t, wrongKey.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }), {
    status: 401,
    code: 'invalid_api_key',
  });
  await refusedWith(t, client.chat.completions.create({ model: 'gpt-4o-mini', messages: [] }), { status: 400, param: 'messages' });
  await refusedWith(t, client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }), {
    status: 404,
    code: 'model_not_found',
  });
  await refusedWith(t, client.chat.completions.create({ model: 'o4-mini', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }), {
    status: 400,
    code: 'unsupported_parameter',
    param: 'max_tokens',
  });
  await refusedWith(t, client.images.generate({ model: 'gpt-image-1', prompt: 'x', response_format: 'b64_json' }), {
    status: 400,
    code: 'unknown_parameter',
    param: 'response_format',
  });
  await refusedWith(t, client.images.generate({ model: 'dall-e-3', prompt: 'x', n: 2 }), { status: 400, param: 'n' });
  await refusedWith(t, client.images.generate({ model: 'dall-e-3', prompt: 'x', size: '1536x1024' }), { status: 400, param: 'size' });
  await refusedWith(
    t,
    client.post('/images/edits', { body: { model: 'gpt-image-1', prompt: 'x' } }),
    { status: 400, message: /expected multipart\/form-data/ },
    'a JSON body on edits',
  );
  await refusedWith(
    t,
    client.images.edit({ model: 'gpt-image-1', prompt: 'x', image: undefined as never }),
    { status: 400, param: 'image' },
    'an edit without an image',
  );
  const png = await OpenAI.toFile(makePng(8, 8), 'a.png', { type: 'image/png' });
  const jpegMask = await OpenAI.toFile(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0]), 'm.jpg', { type: 'image/jpeg' });
  await refusedWith(
    t,
    client.images.edit({ model: 'gpt-image-1', prompt: 'x', image: png, mask: jpegMask }),
    { status: 400, param: 'mask' },
    'a mask that is not PNG',
  );
  await refusedWith(t, client.audio.speech.create({ model: 'tts-1', input: 'x', voice: 'ember' }), { status: 400, param: 'voice' });
  await refusedWith(t, client.audio.speech.create({ model: 'tts-1', input: 'x', voice: 'alloy', response_format: 'ogg' as never }), {
    status: 400,
    param: 'response_format',
  });
  await refusedWith(t, client.post('/chat/nothing', { body: {} }), { status: 404, message: /Invalid URL \(POST \/v1\/chat\/nothing\)/ });
  await refusedWith(t, client.get('/audio/speech'), { status: 405, message: /Invalid method for URL \(GET \/v1\/audio\/speech\)/ });
  const ok = await client.images.edit({ model: 'gpt-image-1', prompt: 'x', image: [png, png] });
  t.equal(ok.data?.length, 1, 'image[] with two files is taken');
  t.equal(fake.received.at(-1)?.body?.['image[]'] && (fake.received.at(-1)!.body!['image[]'] as unknown[]).length, 2);
});

t.test('text_to_text: the chat answer, its usage and the request as documented', async (t) => {
  const adapter = adapterFor({ model: 'gpt-4o-mini' });
  const rec = recorder();
  const job = jobFor('text_to_text', { prompt: 'Say hi', systemPrompt: 'Be brief.', temperature: 0.2, maxTokens: 64, seed: 7 });
  const { providerJobId } = await adapter.submit(job, rec.report);
  t.match(providerJobId, /^openai_[0-9a-f-]{36}$/);
  const end = succeeded(await rec.ended);
  t.equal(end.textOutput, 'echo: Say hi');
  const usage = fake.usage.get(providerJobId)!;
  t.ok(usage.prompt_tokens > 0 && usage.completion_tokens > 0);
  t.same(end.usage, { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens }, 'usage from the answer');
  t.same(
    rec.updates.map((u) => u.type),
    ['running', 'output', 'output', 'output', 'output', 'succeeded'],
    'the answer streamed in pieces, then its end',
  );
  t.same(
    rec.updates.filter((u) => u.type === 'output').map((u) => u.delta),
    ['echo', ':', ' Say', ' hi'],
  );
  const request = requestOf(providerJobId);
  t.equal(request.path, '/chat/completions');
  t.equal(request.headers.authorization, `Bearer ${fake.apiKey}`);
  t.same(request.body, {
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hi' },
    ],
    temperature: 0.2,
    max_tokens: 64,
    seed: 7,
    stream: true,
    stream_options: { include_usage: true },
  });
  t.equal(fake.submissions.get(providerJobId), 1);
  await adapter.close();
});

t.test('text_to_text on a reasoning model sends max_completion_tokens; the organization header rides along', async (t) => {
  const adapter = adapterFor({ model: 'o4-mini' }, testContext(), { organization: fake.organization });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text', { maxTokens: 100, temperature: 1 }), rec.report);
  succeeded(await rec.ended);
  const request = requestOf(providerJobId);
  t.equal(request.body?.max_completion_tokens, 100);
  t.notOk('max_tokens' in request.body!);
  t.equal(request.headers['openai-organization'], fake.organization);
  await adapter.close();
});

t.test('text_to_image: b64_json images decoded, typed and sized from the aspect ratio', async (t) => {
  const adapter = adapterFor({ model: 'dall-e-2' });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_image', { numImages: 2, aspectRatio: '1:1' }), rec.report);
  const end = succeeded(await rec.ended);
  t.equal(end.files.length, 2);
  for (const file of end.files) {
    t.equal(sniffContentType(file.bytes), 'image/png');
    t.same(imageDimensions(file.bytes), { width: 1024, height: 1024 });
    t.same([file.contentType, file.mediaType, file.width, file.height], ['image/png', 'image', 1024, 1024]);
  }
  t.same(requestOf(providerJobId).body, { model: 'dall-e-2', prompt: 'a lighthouse at dawn', n: 2, size: '1024x1024', response_format: 'b64_json' });
  await adapter.close();
});

t.test('text_to_image on gpt-image-1: no response_format (it refuses one), landscape size, usage kept', async (t) => {
  const adapter = adapterFor({ model: 'gpt-image-1', quality: 'low' });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_image', { aspectRatio: '16:9' }), rec.report);
  const end = succeeded(await rec.ended);
  t.same(imageDimensions(end.files[0]!.bytes), { width: 1536, height: 1024 });
  t.same(requestOf(providerJobId).body, { model: 'gpt-image-1', prompt: 'a lighthouse at dawn', n: 1, size: '1536x1024', quality: 'low' });
  t.ok(end.usage && end.usage.outputTokens > 0, 'the GPT image models report tokens');
  await adapter.close();
});

t.test('text_to_image on dall-e-3 answering URLs: each fetched through the egress guard', async (t) => {
  const adapter = adapterFor({ model: 'dall-e-3', imageResponseFormat: 'url', style: 'natural', quality: 'hd' });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_image', { aspectRatio: '9:16' }), rec.report);
  const end = succeeded(await rec.ended);
  t.same(imageDimensions(end.files[0]!.bytes), { width: 1024, height: 1792 });
  t.same(requestOf(providerJobId).body, {
    model: 'dall-e-3',
    prompt: 'a lighthouse at dawn',
    n: 1,
    size: '1024x1792',
    response_format: 'url',
    quality: 'hd',
    style: 'natural',
  });
  await adapter.close();
});

t.test('image_to_image: one image as `image`, a PNG mask, multipart as documented', async (t) => {
  const adapter = adapterFor({ model: 'gpt-image-1' });
  const rec = recorder();
  const image = { bytes: makePng(64, 64), contentType: 'image/png' };
  const mask = { bytes: makePng(64, 64), contentType: 'image/png' };
  const { providerJobId } = await adapter.submit(jobFor('image_to_image', { aspectRatio: '3:4', numImages: 2 }, { images: [image], mask }), rec.report);
  const end = succeeded(await rec.ended);
  t.equal(end.files.length, 2);
  t.same(imageDimensions(end.files[0]!.bytes), { width: 1024, height: 1536 });
  const request = requestOf(providerJobId);
  t.equal(request.path, '/images/edits');
  t.match(request.contentType, /^multipart\/form-data; boundary=/);
  const sent = request.body as Record<string, any>;
  t.same([sent.model, sent.prompt, sent.n, sent.size], ['gpt-image-1', 'a lighthouse at dawn', '2', '1024x1536']);
  t.equal(sent.response_format, undefined);
  t.equal(sent.image.type, 'image/png');
  t.ok(Buffer.compare(sent.image.bytes, image.bytes) === 0, 'the image bytes as given');
  t.equal(sent.mask.type, 'image/png');
  await adapter.close();
});

t.test('image_to_image: several images go as image[]; dall-e-2 gets b64_json', async (t) => {
  const adapter = adapterFor({ model: 'gpt-image-1' });
  const rec = recorder();
  const images = [
    { bytes: makePng(32, 32), contentType: 'image/png' },
    { bytes: makePng(48, 32), contentType: 'image/png' },
  ];
  const { providerJobId } = await adapter.submit(jobFor('image_to_image', {}, { images }), rec.report);
  succeeded(await rec.ended);
  const sent = requestOf(providerJobId).body as Record<string, any>;
  t.equal(sent.image, undefined);
  t.equal(sent['image[]'].length, 2);

  const dalle = adapterFor({ model: 'dall-e-2' });
  const rec2 = recorder();
  const second = await dalle.submit(jobFor('image_to_image', {}, { images: [images[0]!] }), rec2.report);
  t.same(imageDimensions(succeeded(await rec2.ended).files[0]!.bytes), { width: 1024, height: 1024 });
  t.equal((requestOf(second.providerJobId).body as Record<string, any>).response_format, 'b64_json');
  await adapter.close();
  await dalle.close();
});

t.test('text_to_audio: each format asked for, checked by its magic bytes; voices mapped', async (t) => {
  const adapter = adapterFor({ model: 'tts-1' });
  const cases = [
    {
      format: 'mp3',
      voice: 'ember',
      upstream: 'coral',
      responseFormat: 'mp3',
      type: 'audio/mpeg',
      magic: (b: Buffer) => b.subarray(0, 3).toString('latin1') === 'ID3' || (b[0] === 0xff && (b[1]! & 0xe0) === 0xe0),
    },
    {
      format: 'wav',
      voice: 'sage',
      upstream: 'sage',
      responseFormat: 'wav',
      type: 'audio/wav',
      magic: (b: Buffer) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WAVE',
    },
    {
      format: 'ogg',
      voice: 'nova',
      upstream: 'nova',
      responseFormat: 'opus',
      type: 'audio/ogg',
      magic: (b: Buffer) => b.subarray(0, 4).toString('latin1') === 'OggS' && b.includes(Buffer.from('OpusHead')),
    },
  ];
  for (const c of cases) {
    const rec = recorder();
    const { providerJobId } = await adapter.submit(
      jobFor('text_to_audio', { prompt: 'Hello there', voice: c.voice, format: c.format, speed: 1.25 }),
      rec.report,
    );
    const [file] = succeeded(await rec.ended).files;
    t.equal(file!.contentType, c.type, c.format);
    t.equal(file!.mediaType, 'audio');
    t.ok(c.magic(file!.bytes), `${c.format}: the container's magic bytes`);
    t.same(requestOf(providerJobId).body, { model: 'tts-1', input: 'Hello there', voice: c.upstream, response_format: c.responseFormat, speed: 1.25 });
  }
  const custom = adapterFor({ model: 'gpt-4o-mini-tts', voices: { alloy: 'marin' } });
  const rec = recorder();
  const { providerJobId } = await custom.submit(jobFor('text_to_audio', { voice: 'alloy' }), rec.report);
  succeeded(await rec.ended);
  t.equal(requestOf(providerJobId).body?.voice, 'marin', "a deployment's own voice map");
  await adapter.close();
  await custom.close();
});

t.test('the openai client loads at the first call, not with the service or the adapter', async (t) => {
  // A child process records every module it loads (a load hook, told over a port), imports the service's
  // whole module graph, makes an adapter, then runs one chat through it against this file's fake.
  const script = `
    import { register } from 'node:module';
    import { MessageChannel } from 'node:worker_threads';
    const { port1, port2 } = new MessageChannel();
    const seen = new Set();
    port1.on('message', (url) => seen.add(url));
    port1.unref();
    const hook = 'let port; export function initialize(data) { port = data.port; } export async function load(url, context, next) { port.postMessage(url); return next(url, context); }';
    register('data:text/javascript,' + encodeURIComponent(hook), { data: { port: port2 }, transferList: [port2] });
    // The hook tells each load in order: once a module loaded last is told, every earlier one has been.
    let marks = 0;
    async function clientModules() {
      const marker = 'data:text/javascript,export default ' + ++marks;
      await import(marker);
      while (!seen.has(marker)) await new Promise((resolve) => setImmediate(resolve));
      return [...seen].filter((url) => /node_modules\\/openai\\/(index|client)\\.mjs$/.test(url)).map((url) => url.replace(/^.*node_modules\\//, ''));
    }
    await import('./app/service.ts');
    const { createOpenAiAdapter } = await import('./providers/openai/adapter.ts');
    const { jobFor, testContext } = await import('./test/fakes/openai.ts');
    const adapter = createOpenAiAdapter({ apiKey: process.env.FAKE_OPENAI_KEY, baseUrl: process.env.FAKE_OPENAI_URL }, { id: 'lazy', target: { model: 'gpt-4o-mini' } }, testContext());
    const atStart = await clientModules();
    const end = await new Promise((resolve, reject) => {
      adapter.submit(jobFor('text_to_text', { prompt: 'Say hi' }), (u) => (u.type === 'running' || u.type === 'output' ? undefined : resolve(u))).catch(reject);
    });
    await adapter.close();
    console.log(JSON.stringify({ atStart, afterCall: await clientModules(), end: end.type, text: end.textOutput }));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', './test/loader/register.mjs', '--input-type=module', '-e', script], {
    cwd: ROOT,
    env: { ...process.env, FAKE_OPENAI_KEY: fake.apiKey, FAKE_OPENAI_URL: fake.url },
    timeout: 60_000,
  });
  const seen = JSON.parse(stdout.trim().split('\n').at(-1)!) as { atStart: string[]; afterCall: string[]; end: string; text: string };
  t.same(seen.atStart, [], 'neither the service nor a new adapter loads the client');
  t.same(seen.end, 'succeeded', 'the first call loads it and runs');
  t.equal(seen.text, 'echo: Say hi');
  t.same([...seen.afterCall].sort(), ['openai/client.mjs', 'openai/index.mjs'], 'loaded by that call');
});

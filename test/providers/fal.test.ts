// The fal adapter driven against the fake queue: every mode created, followed and its outputs decoded;
// the timeline; resume by provider job id; cancel in every state.
import t from 'tap';
import { encodePng } from '../../providers/local/png.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { createFalAdapter } from '../../providers/fal/adapter.ts';
import type { FalDeploymentTarget } from '../../providers/fal/deployment.ts';
import { parseFalSettings } from '../../providers/fal/settings.ts';
import type { AdapterContext, AdapterJob, AdapterUpdate, ProviderAdapter } from '../../providers/adapter.ts';
import type { Mode } from '../../domain/catalog/models.ts';
import { guardedFetcher } from '../../runtime/egress.ts';
import { startFakeFal, type FakeFal } from '../fakes/fal.ts';
import { fixture } from './support.ts';
import { recorder } from '../helpers/updates.ts';
import { eventually } from '../helpers/eventually.ts';

const KEY = 'fake-key-id-0001:fake-key-secret-abcdef0123456789';

const png = (width: number, height: number) => encodePng(width, height, new Uint8Array(width * height * 3).fill(90));
const [MP4, MP3] = await Promise.all([
  fixture('testsrc2=s=64x48:r=10:d=0.3', ['-c:v', 'libx264', '-movflags', 'frag_keyframe+empty_moov', '-f', 'mp4']),
  fixture('sine=f=440:d=0.3', ['-c:a', 'libmp3lame', '-f', 'mp3']),
]);
const OUTPUT_PNG = await png(64, 48);
let served = 0;

const fake: FakeFal = await startFakeFal({
  key: KEY,
  endpoints: {
    'fal-ai/flux/dev': {
      required: ['prompt'],
      result: (input, f) => ({
        images: [{ url: f.host(`flux-${++served}.png`, OUTPUT_PNG), content_type: 'image/png', width: 64, height: 48 }],
        seed: 42,
        prompt: input.prompt,
        has_nsfw_concepts: [false],
      }),
    },
    'fal-ai/flux/dev/image-to-image': {
      required: ['prompt', 'image_url'],
      imageFields: ['image_url'],
      // Answers an image as large as the one it was given, so the test sees the input arrived.
      result: async (input, f) => {
        const bytes = Buffer.from(String(input.image_url).split(',')[1]!, 'base64');
        const { width, height } = imageDimensions(bytes)!;
        return { images: [{ url: f.host(`edit-${++served}.png`, await png(width, height)), width, height }] };
      },
    },
    'fal-ai/kling-video/v2/master/text-to-video': {
      required: ['prompt'],
      result: (_input, f) => ({ video: { url: f.host(`t2v-${++served}.mp4`, MP4), content_type: 'video/mp4' } }),
    },
    'fal-ai/kling-video/v2/master/image-to-video': {
      required: ['prompt', 'image_url'],
      imageFields: ['image_url'],
      result: (_input, f) => ({ video: { url: f.host(`i2v-${++served}.mp4`, MP4) } }),
    },
    'fal-ai/stable-audio': {
      required: ['prompt'],
      result: (_input, f) => ({ audio_file: { url: f.host(`audio-${++served}.mp3`, MP3), content_type: 'audio/mpeg' } }),
    },
    'fal-ai/any-llm': {
      required: ['prompt'],
      result: (input) => ({ output: `An answer to: ${String(input.prompt)}`, partial: false, error: null }),
    },
  },
});
t.teardown(() => fake.close());

const adapters: ProviderAdapter[] = [];
t.teardown(() => Promise.all(adapters.map((adapter) => adapter.close())));

function adapterFor(target: FalDeploymentTarget, context: Partial<AdapterContext> = {}): ProviderAdapter {
  const { settings, problems } = parseFalSettings({ FAL_KEY: KEY, FAL_QUEUE_URL: fake.url });
  if (!settings) throw new Error(problems.join('; '));
  const adapter = createFalAdapter(
    settings,
    { id: `fal-${target.endpoint}`, target },
    {
      fetchOutput: guardedFetcher({ allowAddress: (a) => a === '127.0.0.1', maxBytes: 1 << 20, timeoutMs: 2_000 }),
      maxResponseBytes: 1 << 20,
      maxOutputBytes: 1 << 20,
      pollIntervalMs: 20,
      requestTimeoutMs: 500,
      now: Date.now,
      ...context,
    },
  );
  adapters.push(adapter);
  return adapter;
}

let generations = 0;
function jobOf(mode: Mode, input: Record<string, unknown>, images: Buffer[] = []): AdapterJob {
  return {
    generationId: `gen-${++generations}`,
    mode,
    modelId: `model-${mode}`,
    params: {},
    input,
    inputs: { images: images.map((bytes) => ({ bytes, contentType: 'image/png' })), videos: [] },
    deadline: Date.now() + 15_000,
  };
}

const requestIdOf = (providerJobId: string) => providerJobId.slice(providerJobId.lastIndexOf(':') + 1);
const succeeded = (update: AdapterUpdate) => {
  if (update.type !== 'succeeded') throw new Error(`expected success, got ${JSON.stringify(update)}`);
  return update;
};
const callsFor = (id: string) => fake.calls.filter((call) => call.includes(id));
/** Waits until `check` holds (a state the fake reaches through polls), at most 5 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  await eventually(check, { what, timeoutMs: 5_000 });
}

t.test('text_to_image', async (t) => {
  t.test('is submitted once to the endpoint with its subpath, followed under the app alone, and ends with the decoded PNG', async (t) => {
    const adapter = adapterFor({ endpoint: 'fal-ai/flux/dev' });
    const job = recorder();
    const before = fake.submissions;
    const { providerJobId } = await adapter.submit(jobOf('text_to_image', { prompt: 'a lighthouse at dawn', num_images: 1 }), job.report);
    const id = requestIdOf(providerJobId);
    t.equal(providerJobId, `fal-ai/flux:${id}`, 'the provider job id carries the app (no subpath) and the request id');
    const result = succeeded(await job.ended);
    t.equal(fake.submissions - before, 1, 'one submission');
    t.same(fake.requests.get(id)!.input, { prompt: 'a lighthouse at dawn', num_images: 1 }, 'the input is AdapterJob.input');
    t.ok(fake.calls.includes('POST /fal-ai/flux/dev'), 'submitted to the endpoint with its subpath, no webhook asked for');
    t.ok(
      callsFor(id).every((call) => call.startsWith(`GET /fal-ai/flux/requests/${id}`) || call.startsWith('PUT')),
      'status and result under the app alone',
    );
    t.ok(callsFor(id).includes(`GET /fal-ai/flux/requests/${id}/status?logs=1`), 'status asked with logs');
    t.ok(callsFor(id).includes(`GET /fal-ai/flux/requests/${id}`), 'the result read');
    t.equal(result.files.length, 1);
    const file = result.files[0]!;
    t.equal(sniffContentType(file.bytes), 'image/png');
    t.same(imageDimensions(file.bytes), { width: 64, height: 48 });
    t.match(file, { contentType: 'image/png', mediaType: 'image', width: 64, height: 48 });
    t.equal(fake.filesWithAuthorization, 0, 'the key never goes to the file host');
  });

  t.test('reports queue positions when they change, then running with the last log lines, before the result', async (t) => {
    const adapter = adapterFor({ endpoint: 'fal-ai/flux/dev' });
    const job = recorder();
    fake.script({ queue: [3, 3, 2, 2, 0], progress: 2 });
    await adapter.submit(jobOf('text_to_image', { prompt: 'queue' }), job.report);
    await job.ended;
    t.same(
      job.updates.map((u) => (u.type === 'progress' ? u.detail : u.type)),
      ["In fal's queue at position 3", "In fal's queue at position 2", "In fal's queue at position 0", 'running', 'step 1 of 2', 'step 2 of 2', 'succeeded'],
    );
  });
});

t.test('image_to_image sends the input image as a data URL in image_url and answers an image of its size', async (t) => {
  const adapter = adapterFor({ endpoint: 'fal-ai/flux/dev/image-to-image' });
  const job = recorder();
  const { providerJobId } = await adapter.submit(jobOf('image_to_image', { prompt: 'as a watercolour', strength: 0.6 }, [await png(40, 30)]), job.report);
  const file = succeeded(await job.ended).files[0]!;
  const request = fake.requests.get(requestIdOf(providerJobId))!;
  t.match(String(request.input.image_url), /^data:image\/png;base64,/);
  t.same(request.images, [{ field: 'image_url', contentType: 'image/png', width: 40, height: 30 }], 'the fake decoded the PNG it was given');
  t.same(imageDimensions(file.bytes), { width: 40, height: 30 });
  t.equal(providerJobId, `fal-ai/flux:${request.id}`);
});

t.test('a deployment names other input fields, e.g. a list of images', async (t) => {
  const adapter = adapterFor({ endpoint: 'fal-ai/flux/dev', files: { images: 'image_urls' } });
  const job = recorder();
  const { providerJobId } = await adapter.submit(jobOf('image_to_image', { prompt: 'two' }, [await png(8, 8), await png(9, 9)]), job.report);
  await job.ended;
  const urls = fake.requests.get(requestIdOf(providerJobId))!.input.image_urls as string[];
  t.equal(urls.length, 2);
  t.ok(urls.every((url) => url.startsWith('data:image/png;base64,')));
});

t.test('text_to_video answers the MP4', async (t) => {
  const adapter = adapterFor({ endpoint: 'fal-ai/kling-video/v2/master/text-to-video' });
  const job = recorder();
  const { providerJobId } = await adapter.submit(jobOf('text_to_video', { prompt: 'waves', duration: '5' }), job.report);
  t.match(providerJobId, /^fal-ai\/kling-video:/);
  const file = succeeded(await job.ended).files[0]!;
  t.equal(file.bytes.subarray(4, 8).toString('latin1'), 'ftyp', 'an ISO BMFF container');
  t.match(file, { contentType: 'video/mp4', mediaType: 'video' });
  t.ok(file.bytes.equals(MP4), 'the bytes the file host served');
});

t.test('image_to_video takes the image and answers the MP4', async (t) => {
  const adapter = adapterFor({ endpoint: 'fal-ai/kling-video/v2/master/image-to-video' });
  const job = recorder();
  const { providerJobId } = await adapter.submit(jobOf('image_to_video', { prompt: 'zoom in' }, [await png(16, 16)]), job.report);
  const file = succeeded(await job.ended).files[0]!;
  t.same(
    fake.requests.get(requestIdOf(providerJobId))!.images.map((i) => [i.width, i.height]),
    [[16, 16]],
  );
  t.equal(file.bytes.subarray(4, 8).toString('latin1'), 'ftyp');
  t.equal(file.mediaType, 'video');
});

t.test('text_to_audio reads audio_file and answers the MP3', async (t) => {
  const adapter = adapterFor({ endpoint: 'fal-ai/stable-audio' });
  const job = recorder();
  await adapter.submit(jobOf('text_to_audio', { prompt: 'rain on a tin roof', seconds_total: 1 }), job.report);
  const file = succeeded(await job.ended).files[0]!;
  const b = file.bytes;
  t.ok(b.subarray(0, 3).toString('latin1') === 'ID3' || (b[0] === 0xff && (b[1]! & 0xe0) === 0xe0), 'an ID3 tag or an MPEG frame sync');
  t.match(file, { contentType: 'audio/mpeg', mediaType: 'audio' });
});

t.test("text_to_text answers the app's output text and no files", async (t) => {
  const adapter = adapterFor({ endpoint: 'fal-ai/any-llm' });
  const job = recorder();
  await adapter.submit(jobOf('text_to_text', { prompt: 'hello', model: 'google/gemini-flash-1.5' }), job.report);
  const result = succeeded(await job.ended);
  t.equal(result.textOutput, 'An answer to: hello');
  t.same(result.files, []);
});

t.test('resume', async (t) => {
  t.test('follows a job from its provider job id alone, with no second submission, to its end', async (t) => {
    const first = adapterFor({ endpoint: 'fal-ai/flux/dev' });
    const before = recorder();
    fake.script({ hold: true });
    const { providerJobId } = await first.submit(jobOf('text_to_image', { prompt: 'survives a crash' }), before.report);
    const id = requestIdOf(providerJobId);
    await until(() => fake.requests.get(id)!.polls >= 1, 'a first poll');
    await first.close(); // the process dies
    const submissions = fake.submissions;

    const second = adapterFor({ endpoint: 'fal-ai/flux/dev' });
    const after = recorder();
    second.resume(providerJobId, jobOf('text_to_image', { prompt: 'survives a crash' }), after.report);
    await fake.advance(id, 'IN_PROGRESS');
    await until(() => after.updates.some((u) => u.type === 'running'), 'running after the resume');
    await fake.advance(id, 'COMPLETED');
    const result = succeeded(await after.ended);
    t.equal(fake.submissions, submissions, 'no second submission');
    t.same(imageDimensions(result.files[0]!.bytes), { width: 64, height: 48 });
    t.same(
      before.updates.filter((u) => u.type !== 'progress'),
      [],
      'the closed adapter reported nothing more',
    );
  });

  t.test('finds a job that ended while nobody followed it', async (t) => {
    const first = adapterFor({ endpoint: 'fal-ai/any-llm' });
    fake.script({ hold: true });
    const { providerJobId } = await first.submit(jobOf('text_to_text', { prompt: 'while down' }), () => undefined);
    await first.close();
    await fake.advance(requestIdOf(providerJobId), 'COMPLETED');
    const second = adapterFor({ endpoint: 'fal-ai/any-llm' });
    const job = recorder();
    second.resume(providerJobId, jobOf('text_to_text', { prompt: 'while down' }), job.report);
    t.equal(succeeded(await job.ended).textOutput, 'An answer to: while down');
    t.same(
      job.updates.map((u) => u.type),
      ['running', 'succeeded'],
      'running is reported before the success it skipped',
    );
  });

  t.test('a provider job id that is not one fails the job without a call', async (t) => {
    const adapter = adapterFor({ endpoint: 'fal-ai/any-llm' });
    const job = recorder();
    const calls = fake.calls.length;
    adapter.resume('not a fal id', jobOf('text_to_text', { prompt: 'x' }), job.report);
    t.match(await job.ended, { type: 'failed', errorCode: 'provider_error' });
    t.equal(fake.calls.length, calls);
  });
});

t.test('cancel', async (t) => {
  const pollsAfter = async (id: string) => {
    const seen = fake.requests.get(id)!.polls;
    await new Promise((r) => setTimeout(r, 120)); // six poll intervals
    return fake.requests.get(id)!.polls - seen;
  };

  t.test('in the queue: fal answers CANCELLATION_REQUESTED, the polls stop and nothing more is reported', async (t) => {
    const adapter = adapterFor({ endpoint: 'fal-ai/flux/dev' });
    const job = recorder();
    fake.script({ hold: true });
    const { providerJobId } = await adapter.submit(jobOf('text_to_image', { prompt: 'cancel me' }), job.report);
    const id = requestIdOf(providerJobId);
    await until(() => fake.requests.get(id)!.polls >= 1, 'a poll');
    await adapter.cancel(providerJobId);
    t.same(
      fake.cancels.filter((c) => c.id === id),
      [{ id, status: 202, answer: 'CANCELLATION_REQUESTED' }],
    );
    t.ok(fake.calls.includes(`PUT /fal-ai/flux/requests/${id}/cancel`), 'PUT to the cancel URL under the app');
    t.equal(await pollsAfter(id), 0, 'no poll after the cancel');
    t.notOk(
      job.updates.some((u) => u.type === 'failed' || u.type === 'succeeded'),
      'no outcome reported',
    );
  });

  t.test('in progress: CANCELLATION_REQUESTED too', async (t) => {
    const adapter = adapterFor({ endpoint: 'fal-ai/flux/dev' });
    const job = recorder();
    fake.script({ hold: true });
    const { providerJobId } = await adapter.submit(jobOf('text_to_image', { prompt: 'cancel me running' }), job.report);
    const id = requestIdOf(providerJobId);
    await fake.advance(id, 'IN_PROGRESS');
    await until(() => job.updates.some((u) => u.type === 'running'), 'running');
    await adapter.cancel(providerJobId);
    t.same(
      fake.cancels.filter((c) => c.id === id),
      [{ id, status: 202, answer: 'CANCELLATION_REQUESTED' }],
    );
    t.equal(await pollsAfter(id), 0);
    t.notOk(job.updates.some((u) => u.type === 'failed' || u.type === 'succeeded'));
  });

  t.test('after completion: ALREADY_COMPLETED (400) is taken quietly', async (t) => {
    const adapter = adapterFor({ endpoint: 'fal-ai/any-llm' });
    const job = recorder();
    const { providerJobId } = await adapter.submit(jobOf('text_to_text', { prompt: 'done already' }), job.report);
    await job.ended;
    await t.resolves(adapter.cancel(providerJobId));
    const id = requestIdOf(providerJobId);
    t.same(
      fake.cancels.filter((c) => c.id === id),
      [{ id, status: 400, answer: 'ALREADY_COMPLETED' }],
    );
    t.equal(job.updates.filter((u) => u.type === 'succeeded' || u.type === 'failed').length, 1);
  });

  t.test("of a job this adapter does not follow (another node's), or fal does not know, still reaches fal and never throws", async (t) => {
    const owner = adapterFor({ endpoint: 'fal-ai/flux/dev' });
    fake.script({ hold: true });
    const { providerJobId } = await owner.submit(jobOf('text_to_image', { prompt: 'elsewhere' }), () => undefined);
    const other = adapterFor({ endpoint: 'fal-ai/flux/dev' });
    await other.cancel(providerJobId);
    const id = requestIdOf(providerJobId);
    t.same(
      fake.cancels.filter((c) => c.id === id).map((c) => c.answer),
      ['CANCELLATION_REQUESTED'],
    );
    await t.resolves(other.cancel('fal-ai/flux:00000000-0000-4000-8000-000000000000'));
    t.equal(fake.cancels.at(-1)!.answer, 'NOT_FOUND');
    await t.resolves(other.cancel('garbage'));
    await owner.close();
  });
});

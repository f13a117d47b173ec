// What goes wrong at fal, and what the job says about it: 429 waits, 5xx, time-outs, malformed and
// oversized answers, refusals of the input, outputs that cannot be fetched, and the key kept out of it all.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { encodePng } from '../../providers/local/png.ts';
import { imageDimensions } from '../../providers/local/sniff.ts';
import { createFalAdapter } from '../../providers/fal/adapter.ts';
import { parseFalSettings } from '../../providers/fal/settings.ts';
import { ProviderFailure, type AdapterContext, type AdapterJob, type ProviderAdapter } from '../../providers/adapter.ts';
import { guardedFetcher } from '../../runtime/egress.ts';
import { startFakeFal, type FakeFal } from '../fakes/fal.ts';
import { recorder } from '../helpers/updates.ts';
import { eventually } from '../helpers/eventually.ts';

const SECRET = 'fake-key-secret-fedcba9876543210';
const KEY = `fake-key-id-0003:${SECRET}`;
// Noise, so that it stays a few kilobytes once compressed.
const IMAGE = await encodePng(32, 32, randomBytes(32 * 32 * 3));
let served = 0;

const fake: FakeFal = await startFakeFal({
  key: KEY,
  endpoints: {
    'fal-ai/flux/dev': {
      required: ['prompt'],
      result: (_input, f) => ({ images: [{ url: f.host(`ok-${++served}.png`, IMAGE) }] }),
    },
    'fal-ai/expired': {
      result: (_input, f) => {
        const name = `gone-${++served}.png`;
        const url = f.host(name, IMAGE);
        f.expire(name);
        return { images: [{ url }] };
      },
    },
    'fal-ai/not-an-image': { result: (_input, f) => ({ images: [{ url: f.host(`text-${++served}.png`, Buffer.from('<html>not an image</html>')) }] }) },
    'fal-ai/private-url': { result: () => ({ images: [{ url: 'http://10.1.2.3/out.png' }] }) },
    'fal-ai/inline': { result: () => ({ images: [{ url: `data:image/png;base64,${IMAGE.toString('base64')}` }] }) },
    'fal-ai/nothing': { result: () => ({ images: [], seed: 1 }) },
  },
});
t.teardown(() => fake.close());

const adapters: ProviderAdapter[] = [];
t.teardown(() => Promise.all(adapters.map((a) => a.close())));

function adapterFor(endpoint = 'fal-ai/flux/dev', context: Partial<AdapterContext> = {}, key = KEY): ProviderAdapter {
  const { settings, problems } = parseFalSettings({ FAL_KEY: key, FAL_QUEUE_URL: fake.url });
  if (!settings) throw new Error(problems.join('; '));
  const adapter = createFalAdapter(
    settings,
    { id: `fal-${endpoint}`, target: { endpoint } },
    {
      fetchOutput: guardedFetcher({ allowAddress: (a) => a === '127.0.0.1', maxBytes: 1 << 20, timeoutMs: 300 }),
      maxResponseBytes: 64 * 1024,
      maxOutputBytes: 1 << 20,
      pollIntervalMs: 20,
      requestTimeoutMs: 300,
      now: Date.now,
      ...context,
    },
  );
  adapters.push(adapter);
  return adapter;
}

const jobOf = (input: Record<string, unknown> = { prompt: 'a heron' }, deadlineMs = 15_000): AdapterJob => ({
  generationId: 'gen-failures',
  mode: 'text_to_image',
  modelId: 'fal/image',
  params: {},
  input,
  inputs: { images: [], videos: [] },
  deadline: Date.now() + deadlineMs,
});

/** Runs one job to its end; answers its terminal update and every update. */
async function run(adapter: ProviderAdapter, job = jobOf()) {
  const r = recorder();
  const { providerJobId } = await adapter.submit(job, r.report);
  return { end: await r.ended, updates: r.updates, providerJobId };
}

async function submitFails(t: Test, adapter: ProviderAdapter, code: string, message?: RegExp) {
  const error = await adapter
    .submit(jobOf(), () => undefined)
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  t.ok(error instanceof ProviderFailure, `submit throws a ProviderFailure (${String(error)})`);
  if (error instanceof ProviderFailure) {
    t.equal(error.code, code);
    if (message) t.match(error.message, message);
  }
}

const requestIdOf = (providerJobId: string) => providerJobId.slice(providerJobId.lastIndexOf(':') + 1);
const posts = () => fake.calls.filter((c) => c.startsWith('POST /')).length;
async function until(check: () => boolean, what: string): Promise<void> {
  await eventually(check, { what, timeoutMs: 5_000 });
}

t.test('429 with Retry-After', async (t) => {
  t.test('on the submission: waits it out, then submits once', async (t) => {
    const before = fake.submissions;
    fake.fault('submit', { status: 429, body: { detail: 'Too many requests' }, headers: { 'retry-after': '1' } });
    const { end, updates } = await run(adapterFor());
    t.match(end, { type: 'succeeded' });
    t.equal(fake.submissions - before, 1, 'accepted once');
    t.match(updates[0], { type: 'progress', detail: /429.*waiting 1 s/ });
  });

  t.test('on a status check while running: the job waits, stays running, then succeeds', async (t) => {
    const adapter = adapterFor();
    const r = recorder();
    fake.script({ hold: true });
    const { providerJobId } = await adapter.submit(jobOf(), r.report);
    const id = requestIdOf(providerJobId);
    await fake.advance(id, 'IN_PROGRESS');
    await until(() => r.updates.some((u) => u.type === 'running'), 'running');
    fake.fault('status', { status: 429, body: { detail: 'Too many requests' }, headers: { 'retry-after': '1' } });
    await until(() => r.updates.some((u) => u.type === 'progress' && /429/.test(u.detail)), 'the wait on the timeline');
    await fake.advance(id, 'COMPLETED');
    t.match(await r.ended, { type: 'succeeded' });
    t.same(
      r.updates.filter((u) => u.type !== 'progress').map((u) => u.type),
      ['running', 'succeeded'],
      'never failed, running once',
    );
  });

  t.test('past the deadline: provider_rate_limited, on a status check and on the submission', async (t) => {
    const adapter = adapterFor();
    fake.fault('status', { status: 429, body: { detail: 'Too many requests' }, headers: { 'retry-after': '3600' } });
    const { end } = await run(adapter, jobOf({ prompt: 'x' }, 5_000));
    t.match(end, { type: 'failed', errorCode: 'provider_rate_limited', errorMessage: /429: Too many requests/ });
    fake.fault('submit', { status: 429, body: { detail: 'Too many requests' }, headers: { 'retry-after': '3600' } });
    await submitFails(t, adapter, 'provider_rate_limited');
  });
});

t.test('the submission', async (t) => {
  t.test('a 5xx is not retried (it may have been accepted): 503 unavailable, 500 error', async (t) => {
    const adapter = adapterFor();
    let before = posts();
    fake.fault('submit', { status: 503, body: { detail: 'No runner available', error_type: 'runner_scheduling_failure' } });
    await submitFails(t, adapter, 'provider_unavailable', /503: No runner available \(runner_scheduling_failure\)/);
    t.equal(posts() - before, 1, 'one POST');
    before = posts();
    fake.fault('submit', { status: 500, body: { detail: 'Internal Server Error' } });
    await submitFails(t, adapter, 'provider_error', /500/);
    t.equal(posts() - before, 1);
  });

  t.test('no answer in time: provider_timeout', async (t) => {
    fake.fault('submit', { hang: true });
    await submitFails(t, adapterFor(), 'provider_timeout', /300 ms/);
  });

  t.test('a dropped connection: provider_unavailable', async (t) => {
    fake.fault('submit', { reset: true });
    await submitFails(t, adapterFor(), 'provider_unavailable');
  });

  t.test('malformed JSON: provider_bad_response', async (t) => {
    fake.fault('submit', { malformed: true });
    await submitFails(t, adapterFor(), 'provider_bad_response', /no request_id/);
  });

  t.test('a wrong key: provider_auth_failed, the key in no message', async (t) => {
    const wrong = 'fake-key-id-0003:wrong-secret-0000000000000';
    const error = await adapterFor('fal-ai/flux/dev', {}, wrong)
      .submit(jobOf(), () => undefined)
      .then(
        () => undefined,
        (e: unknown) => e as ProviderFailure,
      );
    t.match(error, { code: 'provider_auth_failed', message: /401: Invalid API key/ });
    t.notMatch(error!.message, 'wrong-secret');
  });

  t.test('an endpoint fal does not serve: refused with its words', async (t) => {
    await submitFails(t, adapterFor('fal-ai/no-such-app'), 'provider_input_rejected', /404: Application 'fal-ai\/no-such-app' not found/);
  });

  t.test('more than one image where the deployment takes one: refused before any call', async (t) => {
    const before = fake.calls.length;
    const job = {
      ...jobOf(),
      mode: 'image_to_image' as const,
      inputs: {
        images: [
          { bytes: IMAGE, contentType: 'image/png' },
          { bytes: IMAGE, contentType: 'image/png' },
        ],
        videos: [],
      },
    };
    const error = await adapterFor()
      .submit(job, () => undefined)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    t.match(error, { code: 'provider_input_rejected', message: /one input image, not 2/ });
    t.equal(fake.calls.length, before);
  });
});

t.test('status checks', async (t) => {
  t.test('a 503 is tried again, and the job still succeeds', async (t) => {
    fake.fault('status', { status: 503, body: { detail: 'Service Unavailable' } });
    const { end, updates } = await run(adapterFor());
    t.match(end, { type: 'succeeded' });
    t.ok(
      updates.some((u) => u.type === 'progress' && /could not be read.*503/.test(u.detail)),
      'the hiccup is on the timeline',
    );
  });

  t.test('three 503s in a row: provider_unavailable', async (t) => {
    fake.fault('status', { status: 503, body: { detail: 'Service Unavailable' } }, 3);
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_unavailable', errorMessage: /503: Service Unavailable/ });
  });

  t.test('no answer in time, three times: provider_timeout', async (t) => {
    fake.fault('status', { hang: true }, 3);
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_timeout' });
  });

  t.test('malformed JSON, three times: provider_bad_response', async (t) => {
    fake.fault('status', { malformed: true }, 3);
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_bad_response', errorMessage: /not one the API documents/ });
  });

  t.test('an answer over maxResponseBytes, three times: provider_bad_response', async (t) => {
    fake.fault('status', { status: 202, body: JSON.stringify({ status: 'IN_QUEUE', padding: 'x'.repeat(100_000) }) }, 3);
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_bad_response', errorMessage: /larger than 65536 bytes/ });
  });

  t.test('a request fal does not know (resumed with a made-up id): provider_error', async (t) => {
    const r = recorder();
    adapterFor().resume('fal-ai/flux:00000000-0000-4000-8000-00000000dead', jobOf(), r.report);
    t.match(await r.ended, { type: 'failed', errorCode: 'provider_error', errorMessage: /404: Request not found/ });
  });

  t.test('the key never reaches a message, even when fal echoes it', async (t) => {
    fake.fault('status', { status: 500, body: { detail: `bad header Authorization: Key ${KEY}; secret ${SECRET}` } }, 3);
    const { end, updates } = await run(adapterFor());
    t.match(end, { type: 'failed', errorCode: 'provider_error' });
    const said = JSON.stringify(updates);
    t.notOk(said.includes(SECRET), 'the secret is in no update');
    t.notOk(said.includes(KEY), 'nor the key');
    t.match(said, /\[redacted\]/);
  });

  t.test('the deadline passing in the queue: provider_timeout, and the job is cancelled at fal', async (t) => {
    fake.script({ hold: true });
    const { end, providerJobId } = await run(adapterFor(), jobOf({ prompt: 'slow' }, 300));
    t.match(end, { type: 'failed', errorCode: 'provider_timeout' });
    const id = requestIdOf(providerJobId);
    await until(() => fake.cancels.some((c) => c.id === id), 'the cancel');
    t.equal(fake.cancels.find((c) => c.id === id)!.answer, 'CANCELLATION_REQUESTED');
  });
});

t.test('the result', async (t) => {
  t.test('422 (a field missing): provider_input_rejected with the field named', async (t) => {
    const { end } = await run(adapterFor(), jobOf({ image_size: 'square_hd' }));
    t.match(end, { type: 'failed', errorCode: 'provider_input_rejected', errorMessage: /422: prompt: Field required/ });
  });

  t.test('the content checker: provider_content_policy', async (t) => {
    fake.script({
      outcome: {
        status: 422,
        body: { detail: [{ loc: ['body', 'prompt'], msg: 'The content was flagged by a content checker.', type: 'content_policy_violation' }] },
      },
    });
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_content_policy', errorMessage: /flagged by a content checker/ });
  });

  t.test('the app raised (500): provider_error; fal timed it out (504 request_timeout): provider_timeout', async (t) => {
    fake.script({ outcome: { status: 500, body: { detail: 'CUDA out of memory' } } });
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_error', errorMessage: /500: CUDA out of memory/ });
    fake.script({ outcome: { status: 504, body: { detail: 'Request timed out', error_type: 'request_timeout' } } });
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_timeout', errorMessage: /Request timed out/ });
  });

  t.test('cancelled at fal by someone else: provider_cancelled', async (t) => {
    const adapter = adapterFor();
    const r = recorder();
    fake.script({ hold: true });
    const { providerJobId } = await adapter.submit(jobOf(), r.report);
    await adapterFor().cancel(providerJobId); // another node, or the dashboard
    t.match(await r.ended, { type: 'failed', errorCode: 'provider_cancelled', errorMessage: /cancelled/ });
  });

  t.test('a result that is not JSON: provider_bad_response', async (t) => {
    fake.fault('result', { status: 200, body: '<html>oops</html>' });
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_bad_response', errorMessage: /not JSON/ });
  });

  t.test('a result with no image: provider_bad_response', async (t) => {
    t.match((await run(adapterFor('fal-ai/nothing'))).end, { type: 'failed', errorCode: 'provider_bad_response', errorMessage: /no image URL/ });
  });
});

t.test('outputs', async (t) => {
  t.test('an expired URL (404): provider_output_fetch_failed', async (t) => {
    t.match((await run(adapterFor('fal-ai/expired'))).end, { type: 'failed', errorCode: 'provider_output_fetch_failed', errorMessage: /answered 404/ });
  });

  t.test('larger than maxOutputBytes: provider_output_fetch_failed', async (t) => {
    t.match((await run(adapterFor('fal-ai/flux/dev', { maxOutputBytes: 1000 }))).end, {
      type: 'failed',
      errorCode: 'provider_output_fetch_failed',
      errorMessage: /larger than the 1000 bytes/,
    });
    const guarded = guardedFetcher({ allowAddress: (a) => a === '127.0.0.1', maxBytes: 1000, timeoutMs: 300 });
    t.match((await run(adapterFor('fal-ai/flux/dev', { fetchOutput: guarded }))).end, {
      type: 'failed',
      errorCode: 'provider_output_fetch_failed',
      errorMessage: /more than the 1000 allowed|larger than the 1000/,
    });
  });

  t.test('a file host that never answers: provider_output_fetch_failed', async (t) => {
    fake.fault('file', { hang: true });
    t.match((await run(adapterFor())).end, { type: 'failed', errorCode: 'provider_output_fetch_failed' });
  });

  t.test('a URL the egress guard refuses (a private address) is never fetched: provider_output_fetch_failed', async (t) => {
    t.match((await run(adapterFor('fal-ai/private-url'))).end, { type: 'failed', errorCode: 'provider_output_fetch_failed', errorMessage: /10\.1\.2\.3/ });
  });

  t.test('bytes that are not an image: provider_bad_response', async (t) => {
    t.match((await run(adapterFor('fal-ai/not-an-image'))).end, { type: 'failed', errorCode: 'provider_bad_response', errorMessage: /not an image file/ });
  });

  t.test('a data URL (an app in sync mode) is decoded without a fetch', async (t) => {
    const fetches = fake.fileFetches;
    const { end } = await run(adapterFor('fal-ai/inline'));
    t.match(end, { type: 'succeeded' });
    if (end.type === 'succeeded') t.same(imageDimensions(end.files[0]!.bytes), { width: 32, height: 32 });
    t.equal(fake.fileFetches, fetches);
  });
});

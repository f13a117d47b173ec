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
import { dataUrl, startCogFake, startEventsRoute, type CogFake, type CogFakeKnobs, type EventsRoute } from '../fakes/cog.ts';

const SECRET = 'cog-webhook-secret-of-the-tests-0123456789';

async function png(width: number, height: number): Promise<Buffer> {
  return encodePng(width, height, new Uint8Array(width * height * 3).fill(200));
}

/** A WAV file: RIFF header, fmt chunk, 100 samples of silence. */
function wav(): Buffer {
  const data = Buffer.alloc(200);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1'); header.writeUInt32LE(36 + data.length, 4); header.write('WAVE', 8, 'latin1');
  header.write('fmt ', 12, 'latin1'); header.writeUInt32LE(16, 16); header.writeUInt16LE(1, 20); header.writeUInt16LE(1, 22);
  header.writeUInt32LE(8000, 24); header.writeUInt32LE(16000, 28); header.writeUInt16LE(2, 32); header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1'); header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

interface Harness {
  fake: CogFake;
  route: EventsRoute;
  settings: CogSettings;
  context: AdapterContext;
  adapter(options?: { context?: Partial<AdapterContext>; target?: CogDeploymentTarget; settings?: Partial<CogSettings> }): ProviderAdapter;
}

async function harness(t: Test, knobs: Partial<CogFakeKnobs> = {}): Promise<Harness> {
  const fake = await startCogFake(knobs);
  const route = await startEventsRoute();
  const settings: CogSettings = { baseUrl: fake.url, webhookSecret: SECRET, maxConcurrentJobs: 1, busyRetryMs: 20 };
  const context: AdapterContext = {
    fetchOutput: guardedFetcher({ allowAddress: (address) => address === '127.0.0.1', maxBytes: 64 * 1024, timeoutMs: 2_000 }),
    eventsUrl: route.url,
    maxResponseBytes: 1 << 20,
    maxOutputBytes: 64 * 1024,
    pollIntervalMs: 40,
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
    fake, route, settings, context,
    adapter(options = {}) {
      const adapter = createCogAdapter({ ...settings, ...options.settings }, { id: 'cog-test', target: options.target ?? {} }, { ...context, ...options.context });
      adapters.push(adapter);
      route.adapter = adapter;
      return adapter;
    },
  };
}

function job(mode: Mode, input: Record<string, unknown> = { prompt: 'an onion with sunglasses' }, extra: Partial<AdapterJob> = {}): AdapterJob {
  return {
    generationId: `gen_${randomUUID().replace(/-/g, '')}`, mode, modelId: 'cog/test', params: {}, input,
    inputs: { images: [], videos: [] }, deadline: Date.now() + 10_000, ...extra,
  };
}

/** Collects a job's updates; `end()` resolves with its terminal update (the guard time only stops a hung test). */
function recorder() {
  const updates: AdapterUpdate[] = [];
  let wake = () => {};
  const report = (update: AdapterUpdate) => { updates.push(update); wake(); };
  const until = async (done: (updates: AdapterUpdate[]) => boolean, guardMs = 5_000) => {
    const stop = Date.now() + guardMs;
    while (!done(updates)) {
      if (Date.now() > stop) throw new Error(`no such update after ${guardMs} ms: ${JSON.stringify(updates)}`);
      await new Promise<void>((resolve) => { wake = resolve; setTimeout(resolve, 20); });
    }
  };
  const terminal = () => updates.filter((update) => update.type === 'succeeded' || update.type === 'failed');
  const end = async () => { await until(() => terminal().length > 0); return terminal()[0]!; };
  return { updates, report, until, terminal, end };
}

t.test('text_to_image: PUT with the generation id, followed by webhooks, the data URL decoded', async (t) => {
  const image = await png(8, 6);
  const h = await harness(t, { model: () => ({ output: [dataUrl('image/png', image)] }) });
  // A backstop that never comes due: the webhooks alone carry the job.
  const adapter = h.adapter({ context: { pollIntervalMs: 60_000 } });
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
  t.same(h.route.accepted.map((event) => event.providerJobId), [j.generationId, j.generationId], 'start and completed, verified');
  t.same(h.route.refused, []);
});

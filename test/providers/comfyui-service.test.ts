import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { PLAN_CREDITS, providerCatalogFile } from '../helpers/provider-catalog.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { startFakeComfyui, WORKFLOWS } from '../fakes/comfyui.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor, type Gen } from '../generations/flow.ts';

/**
 * ComfyUI deployments through the public API: the real server (HTTP in and out) with the ComfyUI fake as
 * its upstream. A text_to_image workflow and an image_to_image one (whose input image goes up through
 * /upload/image) are created by POST /v1/generations, followed to `succeeded`, their outputs downloaded
 * through GET /v1/assets/{id}/download and decoded, and each job is charged once.
 */
const fake = await startFakeComfyui();
t.teardown(() => fake.close());

const catalogFile = providerCatalogFile(t, [
  {
    id: 'comfy/sd15',
    mode: 'text_to_image',
    credits: 3,
    parameters: { prompt: { required: true }, negativePrompt: {}, seed: {}, aspectRatio: {}, numImages: { maximum: 2 } },
    deployment: {
      id: 'sd15-comfyui',
      provider: 'comfyui',
      target: { workflow: WORKFLOWS.textToImage, defaults: { steps: 20 } },
      input: { aspectRatio: { width: 'width', height: 'height', longSide: 64 } },
    },
  },
  {
    id: 'comfy/img2img',
    mode: 'image_to_image',
    credits: 4,
    parameters: { prompt: { required: true }, seed: {}, strength: {} },
    deployment: { id: 'img2img-comfyui', provider: 'comfyui', target: { workflow: WORKFLOWS.imageToImage } },
  },
]);

const server: TestServer = await startTestServer(t, {
  env: {
    CATALOG_FILE: catalogFile,
    ALLOW_PRIVATE_EGRESS: 'true',
    COMFYUI_BASE_URL: fake.url,
    PROVIDER_POLL_MS: '50',
    PROVIDER_REQUEST_TIMEOUT_MS: '5000',
  },
});
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
const query = serverQuery(server);

async function run(body: Record<string, unknown>): Promise<Gen> {
  const created = await createGeneration(server, key, user.workspaceId, body);
  if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
  return waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
}

async function download(assetId: string): Promise<Buffer> {
  const link = await server.json(`/v1/assets/${assetId}/download?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  if (link.status !== 200) throw new Error(`download link: ${link.status} ${JSON.stringify(link.body)}`);
  return Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
}

t.test('text_to_image: the workflow filled from the parameters, queued once, its two images downloaded and decoded, 2 × 3 credits captured once', async (t) => {
  const before = fake.submissions.length;
  const done = await run({
    mode: 'text_to_image',
    model: 'comfy/sd15',
    params: { prompt: 'a lighthouse at dawn', negativePrompt: 'fog', seed: 42, aspectRatio: '16:9', numImages: 2 },
  });
  t.equal(done.status, 'succeeded', JSON.stringify([done.errorCode, done.errorMessage]));
  t.equal(fake.submissions.length - before, 1, 'one POST /prompt');
  const prompt = fake.submissions.at(-1)!.prompt;
  t.same(prompt['5']!.inputs, { width: 64, height: 40, batch_size: 2 }, "the catalog's mapping: aspect ratio to width and height, numImages to the batch");
  t.same([prompt['3']!.inputs.seed, prompt['3']!.inputs.steps], [42, 20], "the seed given, the deployment's default steps");
  t.equal(prompt['6']!.inputs.text, 'a lighthouse at dawn');
  t.equal(prompt['7']!.inputs.text, 'blurry, fog');
  t.ok(
    done.timeline.some((e) => e.status === 'running'),
    'running on the way',
  );

  t.equal(done.outputAssetIds.length, 2, "SaveImage's two images; the preview left aside");
  for (const id of done.outputAssetIds) {
    const bytes = await download(id);
    t.equal(sniffContentType(bytes), 'image/png');
    t.same(imageDimensions(bytes), { width: 64, height: 40 });
  }
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  t.same(ledger[done.id], { reserve: 1, capture: 1 }, 'reserved once, captured once');
});

t.test('image_to_image: the input image goes up through /upload/image, LoadImage takes it, the output is downloaded and decoded', async (t) => {
  const input = makePng(40, 24);
  const before = fake.submissions.length;
  const done = await run({
    mode: 'image_to_image',
    model: 'comfy/img2img',
    params: { prompt: 'linocut', strength: 0.5, seed: 7 },
    inputs: { imageUrls: [`data:image/png;base64,${input.toString('base64')}`] },
  });
  t.equal(done.status, 'succeeded', JSON.stringify([done.errorCode, done.errorMessage]));
  t.equal(fake.submissions.length - before, 1, 'one POST /prompt');
  const prompt = fake.submissions.at(-1)!.prompt;
  const name = String(prompt['10']!.inputs.image);
  t.equal(name, `${done.id}-image.png`, 'LoadImage names the file uploaded for this job');
  t.same(fake.files.get(`input/${name}`), input, "the uploaded bytes are the job's input");
  t.equal(prompt['3']!.inputs.denoise, 0.5, "strength as the sampler's denoise");
  t.ok(fake.requests.includes('POST /upload/image'));

  t.equal(done.outputAssetIds.length, 1);
  const bytes = await download(done.outputAssetIds[0]!);
  t.equal(sniffContentType(bytes), 'image/png');
  t.same(imageDimensions(bytes), { width: 40, height: 24 }, "the output has the input's size (the fake draws it so): the input arrived");
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  t.same(ledger[done.id], { reserve: 1, capture: 1 });
});

t.test('the money of both jobs: the balance equals the ledger, nothing left reserved', async (t) => {
  t.same(await moneyOf(query, user.workspaceId), {
    available: PLAN_CREDITS - 6 - 4,
    reserved: 0,
    ledgerAvailable: PLAN_CREDITS - 6 - 4,
    ledgerReserved: 0,
    reservations: [],
  });
});

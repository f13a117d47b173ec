/**
 * Images and speech on the OpenAI-compatible door (docs/openai-compatible.md) with the official `openai`
 * client, over the shipped catalog's local models: images.generate, images.edit (multipart, its images
 * stored as assets of the workspace) and audio.speech.create, each request a generation of the key's workspace.
 */
import t, { type Test } from 'tap';
import OpenAI, { BadRequestError, NotFoundError, PermissionDeniedError, toFile } from 'openai';
import { sharedTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { downloadAsset, looksLikeMp3 } from '../helpers/provider-service.ts';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

async function client() {
  const server = await sharedTestServer();
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  return { server, user, key, openai: new OpenAI({ baseURL: `${server.url}/openai/v1`, apiKey: key, maxRetries: 0 }) };
}

/** Width and height of a PNG, from its IHDR; throws if the bytes are not a PNG. */
function pngSize(bytes: Buffer): { width: number; height: number } {
  if (!bytes.subarray(0, 8).equals(PNG_SIGNATURE) || bytes.toString('latin1', 12, 16) !== 'IHDR') throw new Error('not a PNG');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

async function generationOf(server: TestServer, key: string, workspaceId: string, id: string | null) {
  if (!id) throw new Error('the answer has no X-Generation-Id');
  const row = await server.json(`/v1/generations/${id}?workspaceId=${workspaceId}`, { headers: withKey(key) });
  if (row.status !== 200) throw new Error(`generation ${id}: ${row.status}`);
  return row.body;
}

async function generationCount(server: TestServer, key: string, workspaceId: string): Promise<number> {
  const list = await server.json(`/v1/generations?workspaceId=${workspaceId}&limit=100`, { headers: withKey(key) });
  return list.body.data.length;
}

/** The assets a workspace holds that no generation made: its uploads (and the door's input images). */
async function uploadedAssets(server: TestServer, key: string, workspaceId: string): Promise<Array<{ id: string; contentType: string; width: number }>> {
  const list = await server.json(`/v1/assets?workspaceId=${workspaceId}&limit=100`, { headers: withKey(key) });
  return list.body.data.filter((asset: { sourceGenerationId: string | null }) => asset.sourceGenerationId === null);
}

/** Follows a signed link: one to the service itself on the address the test reaches it at (as downloadAsset does). */
async function follow(server: TestServer, link: string): Promise<{ status: number; bytes: Buffer; contentType: string | null }> {
  const url = new URL(link);
  const response = url.origin === new URL(server.config.baseUrl).origin ? await server.fetch(`${url.pathname}${url.search}`) : await fetch(url);
  return { status: response.status, bytes: Buffer.from(await response.arrayBuffer()), contentType: response.headers.get('content-type') };
}

t.test('images.generate: n decodable PNGs as base64, of the ratio the size asks, each an output of one generation', async (t) => {
  const { server, user, key, openai } = await client();
  const { data: answer, response } = await openai.images
    .generate({ model: 'local/image-fast', prompt: 'A lighthouse at dawn, watercolour', n: 2, size: '1536x1024' })
    .withResponse();
  t.type(answer.created, 'number');
  t.equal(answer.data?.length, 2, 'n images');
  const images = answer.data!.map((image) => {
    t.equal(image.url, undefined, 'base64 by default, no link');
    return Buffer.from(image.b64_json!, 'base64');
  });
  for (const image of images) t.same(pngSize(image), { width: 512, height: 384 }, '1536x1024 is 4:3: the local model makes 512x384');
  t.not(images[0]!.toString('base64'), images[1]!.toString('base64'), 'two different images');

  const generation = await generationOf(server, key, user.workspaceId, response.headers.get('x-generation-id'));
  t.equal(generation.status, 'succeeded');
  t.equal(generation.mode, 'text_to_image');
  t.equal(generation.modelId, 'local/image-fast');
  t.equal(generation.params.prompt, 'A lighthouse at dawn, watercolour');
  t.equal(generation.params.numImages, 2);
  t.equal(generation.params.aspectRatio, '4:3');
  t.equal(generation.credits, 8, 'two images of 4 credits');
  t.equal(generation.outputAssetIds.length, 2);
  for (const [i, assetId] of generation.outputAssetIds.entries()) {
    t.ok((await downloadAsset(server, key, user.workspaceId, assetId)).equals(images[i]!), `image ${i} is the bytes of output ${i}`);
  }
});

t.test('images.generate with response_format url: signed links to the outputs, which need no credentials', async (t) => {
  const { server, user, key, openai } = await client();
  const { data: answer, response } = await openai.images
    .generate({ model: 'local/image-fast', prompt: 'A red barn in the snow', size: '1024x1792', response_format: 'url' })
    .withResponse();
  t.equal(answer.data?.length, 1);
  const image = answer.data![0]!;
  t.equal(image.b64_json, undefined);
  const fetched = await follow(server, image.url!);
  t.equal(fetched.status, 200);
  t.equal(fetched.contentType, 'image/png');
  t.same(pngSize(fetched.bytes), { width: 288, height: 512 }, '1024x1792 is 9:16');
  const generation = await generationOf(server, key, user.workspaceId, response.headers.get('x-generation-id'));
  t.ok((await downloadAsset(server, key, user.workspaceId, generation.outputAssetIds[0])).equals(fetched.bytes), 'the link is the output');
});

t.test('images.edit: the uploaded PNG is an asset of the workspace and the input of an image_to_image generation', async (t) => {
  const { server, user, key, openai } = await client();
  const png = makePng(64, 48);
  const { data: answer, response } = await openai.images
    .edit({ model: 'local/image-edit', image: await toFile(png, 'photo.png', { type: 'image/png' }), prompt: 'Make it look like a linocut print', n: 2 })
    .withResponse();
  t.equal(answer.data?.length, 2);
  for (const image of answer.data!) t.ok(pngSize(Buffer.from(image.b64_json!, 'base64')).width > 0, 'a PNG');

  const generation = await generationOf(server, key, user.workspaceId, response.headers.get('x-generation-id'));
  t.equal(generation.status, 'succeeded');
  t.equal(generation.mode, 'image_to_image');
  t.equal(generation.modelId, 'local/image-edit');
  t.equal(generation.params.numImages, 2);
  t.equal(generation.inputs.imageAssetIds?.length, 1, 'one input image');
  const inputId = generation.inputs.imageAssetIds[0];
  const asset = await server.json(`/v1/assets/${inputId}?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  t.equal(asset.status, 200, 'the input is an asset of the workspace');
  t.equal(asset.body.contentType, 'image/png');
  t.equal(asset.body.width, 64);
  t.equal(asset.body.height, 48);
  t.equal(asset.body.name, 'photo.png');
  t.ok((await downloadAsset(server, key, user.workspaceId, inputId)).equals(png), 'its bytes are the uploaded ones');
});

t.test('images.edit with several images (image[]) and response_format url; a replay of its Idempotency-Key keeps no new image', async (t) => {
  const { server, user, key, openai } = await client();
  const images = [await toFile(makePng(8, 8), 'a.png', { type: 'image/png' }), await toFile(makePng(16, 8), 'b.png', { type: 'image/png' })];
  const edit = () =>
    openai.images
      .edit({ model: 'local/image-edit', image: images, prompt: 'Film noir', response_format: 'url' }, { headers: { 'Idempotency-Key': 'edit-1' } })
      .withResponse();
  const first = await edit();
  const fetched = await follow(server, first.data.data![0]!.url!);
  t.equal(fetched.status, 200);
  t.ok(pngSize(fetched.bytes).width > 0);
  const generation = await generationOf(server, key, user.workspaceId, first.response.headers.get('x-generation-id'));
  t.equal(generation.inputs.imageAssetIds?.length, 2, 'both images are inputs');
  const inputs = await uploadedAssets(server, key, user.workspaceId);
  t.same(inputs.map((a) => a.id).sort(), [...generation.inputs.imageAssetIds].sort(), 'and assets of the workspace');
  t.same(inputs.map((a) => a.width).sort(), [16, 8].sort());

  const again = await edit();
  t.equal(again.response.headers.get('idempotent-replayed'), 'true');
  t.equal(again.response.headers.get('x-generation-id'), generation.id, 'the first job answers');
  t.equal((await uploadedAssets(server, key, user.workspaceId)).length, 2, "the replay's images were not kept");
  t.equal(await generationCount(server, key, user.workspaceId), 1);
});

t.test('audio.speech.create: the audio bytes with their Content-Type, a text_to_audio generation of the workspace', async (t) => {
  const { server, user, key, openai } = await client();
  const input = 'Welcome to the Generation Service. This is a test of speech.';
  const speech = await openai.audio.speech.create({ model: 'local/voice', input, voice: 'coral' });
  t.equal(speech.headers.get('content-type'), 'audio/mpeg');
  const bytes = Buffer.from(await speech.arrayBuffer());
  t.ok(bytes.length > 1000, `${bytes.length} bytes`);
  t.ok(looksLikeMp3(bytes), 'MP3 by default');
  const generation = await generationOf(server, key, user.workspaceId, speech.headers.get('x-generation-id'));
  t.equal(generation.status, 'succeeded');
  t.equal(generation.mode, 'text_to_audio');
  t.equal(generation.params.prompt, input);
  t.equal(generation.params.voice, 'ember', "OpenAI's coral is our ember");
  t.equal(generation.params.format, 'mp3');
  t.equal(generation.params.durationSeconds, Math.ceil(input.length / 15), 'as long as the input takes to read');
  t.ok((await downloadAsset(server, key, user.workspaceId, generation.outputAssetIds[0])).equals(bytes), 'the answer is the output');

  const wav = await openai.audio.speech.create({ model: 'local/voice', input: 'Short.', voice: 'nova', response_format: 'wav', speed: 1.5 });
  t.equal(wav.headers.get('content-type'), 'audio/wav');
  const wavBytes = Buffer.from(await wav.arrayBuffer());
  t.equal(wavBytes.toString('latin1', 0, 4), 'RIFF');
  t.equal(wavBytes.toString('latin1', 8, 12), 'WAVE');
  const second = await generationOf(server, key, user.workspaceId, wav.headers.get('x-generation-id'));
  t.same([second.params.voice, second.params.format, second.params.speed, second.params.durationSeconds], ['nova', 'wav', 1.5, 1]);

  const ogg = await openai.audio.speech.create({ model: 'local/voice', input: 'Opus, please.', voice: 'sage', response_format: 'opus' });
  t.equal(ogg.headers.get('content-type'), 'audio/ogg');
  t.equal(Buffer.from(await ogg.arrayBuffer()).toString('latin1', 0, 4), 'OggS', 'opus comes in the Ogg container');
});

/** A refusal: BadRequestError naming its param, with its code. */
async function refused(t: Test, attempt: Promise<unknown>, param: string, code?: string) {
  const error = await attempt.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(error, BadRequestError, `refused naming ${param}`);
  t.equal((error as BadRequestError).param, param);
  if (code) t.equal((error as BadRequestError).code, code);
}

t.test('what the door cannot honour is refused naming its param, and makes no generation', async (t) => {
  const { server, user, key, openai } = await client();
  const prompt = 'A lighthouse';
  await refused(t, openai.images.generate({ model: 'local/image-fast', prompt, size: '1000x700' as never }), 'size', 'invalid_value');
  await refused(t, openai.images.generate({ model: 'local/image-fast', prompt, logit_bias: 2 } as never), 'logit_bias', 'unknown_parameter');
  await refused(t, openai.images.generate({ model: 'local/image-fast', prompt, n: 9 }), 'n');
  await refused(t, openai.images.generate({ model: 'local/image-fast', prompt, style: 'vivid' }), 'style', 'unsupported_parameter');
  await refused(t, openai.images.generate({ model: 'local/image-fast', prompt, quality: 'hd' }), 'quality', 'unsupported_value');
  await refused(t, openai.images.generate({ model: 'local/image-fast', prompt, output_format: 'jpeg' }), 'output_format', 'unsupported_value');
  await refused(t, openai.images.generate({ model: 'local/image-fast', prompt: 'x'.repeat(4001) }), 'prompt');
  await refused(t, openai.images.generate({ model: 'local/image-fast' } as never), 'prompt', 'missing_required_parameter');

  const png = await toFile(makePng(), 'in.png', { type: 'image/png' });
  await refused(t, openai.images.edit({ model: 'local/image-edit', image: png, prompt, size: '300x200' as never }), 'size');
  await refused(t, openai.images.edit({ model: 'local/image-edit', image: png, prompt, mask: png }), 'mask', 'unsupported_parameter');
  await refused(t, openai.images.edit({ model: 'local/image-edit', image: png, prompt, seed: 3 } as never), 'seed', 'unknown_parameter');
  await refused(t, openai.images.edit({ model: 'local/image-edit', image: await toFile(Buffer.from('plain text, not an image'), 'in.png'), prompt }), 'image');
  await refused(t, openai.images.edit({ model: 'local/image-edit', image: [png, png, png, png, png], prompt }), 'image');

  await refused(t, openai.audio.speech.create({ model: 'local/voice', input: 'Hello', voice: 'onyx' }), 'voice', 'unsupported_value');
  await refused(t, openai.audio.speech.create({ model: 'local/voice', input: 'Hello', voice: 'alloy', response_format: 'flac' }), 'response_format');
  await refused(t, openai.audio.speech.create({ model: 'local/voice', input: 'Hello', voice: 'alloy', speed: 3 }), 'speed');
  await refused(t, openai.audio.speech.create({ model: 'local/voice', input: 'Hello', voice: 'alloy', instructions: 'Whisper.' }), 'instructions');
  await refused(t, openai.audio.speech.create({ model: 'local/voice', input: 'Hello', voice: 'alloy', pitch: 2 } as never), 'pitch', 'unknown_parameter');
  await refused(t, openai.audio.speech.create({ model: 'local/voice', input: 'Hello. '.repeat(100), voice: 'alloy' }), 'input', 'string_above_max_length');

  t.equal(await generationCount(server, key, user.workspaceId), 0, 'no refusal made a generation');
  t.equal((await uploadedAssets(server, key, user.workspaceId)).length, 0, 'nor kept an image');

  // The raw body of a refusal: OpenAI's four fields.
  const raw = await server.json('/openai/v1/images/generations', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({ model: 'local/image-fast', prompt, size: '123x456' }),
  });
  t.equal(raw.status, 400);
  t.same(Object.keys(raw.body.error).sort(), ['code', 'message', 'param', 'type']);
  t.equal(raw.body.error.param, 'size');
  t.equal(raw.body.error.type, 'invalid_request_error');
  // A key that may not make generations is refused before its body is read.
  const { key: readOnly } = await createKey(server, user.cookie, user.workspaceId, ['generations.read']);
  const reader = new OpenAI({ baseURL: `${server.url}/openai/v1`, apiKey: readOnly, maxRetries: 0 });
  t.type(await reader.images.edit({ model: 'local/image-edit', image: png, prompt }).catch((e: unknown) => e), PermissionDeniedError);
  t.type(await reader.audio.speech.create({ model: 'local/voice', input: 'Hello', voice: 'alloy' }).catch((e: unknown) => e), PermissionDeniedError);
  // An edit that is not multipart.
  const json = await server.json('/openai/v1/images/edits', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({ model: 'local/image-edit', prompt }),
  });
  t.equal(json.status, 400);
  t.equal(json.body.error.type, 'invalid_request_error');
});

t.test('a model of another mode is 404 model_not_found naming model', async (t) => {
  const { openai } = await client();
  const png = await toFile(makePng(), 'in.png', { type: 'image/png' });
  const attempts: Array<[string, () => Promise<unknown>]> = [
    ['images.generate with a text model', () => openai.images.generate({ model: 'local/text-mini', prompt: 'x' })],
    ['images.generate with an edit model', () => openai.images.generate({ model: 'local/image-edit', prompt: 'x' })],
    ['images.edit with a text_to_image model', () => openai.images.edit({ model: 'local/image-fast', image: png, prompt: 'x' })],
    ['speech with an image model', () => openai.audio.speech.create({ model: 'local/image-fast', input: 'x', voice: 'alloy' })],
    ['speech with an unknown model', () => openai.audio.speech.create({ model: 'nope/voice', input: 'x', voice: 'alloy' })],
  ];
  for (const [what, attempt] of attempts) {
    const error = await attempt().then(
      () => undefined,
      (e: unknown) => e,
    );
    t.type(error, NotFoundError, what);
    t.equal((error as NotFoundError).code, 'model_not_found', what);
    t.equal((error as NotFoundError).param, 'model', what);
  }
});

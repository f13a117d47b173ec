import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import { ApiError, ParamError } from '../../errors.ts';
import { placeReadBody } from '../../pipeline/placement.ts';
import { defineRoute, type Principal, type Reply } from '../../route.ts';
import type { Services } from '../../services.ts';
import { isChatParam } from '../../../domain/catalog/chat.ts';
import type { ModelRecord } from '../../../domain/catalog/models.ts';
import { ASPECT_RATIOS } from '../../../domain/catalog/params.ts';
import type { GenerationInputsIn } from '../generations/inputs.ts';
import { openWorkspace } from '../workspaces/access.ts';
import { failureReply } from './answers.ts';
import { invalid, refuseUnknown, requestModelOf } from './chat-request.ts';
import { keyOf, modelOf, startDoorJob, type Ended } from './door-job.ts';
import { keyWorkspace } from './key-owner.ts';
import { checkImages, readForm, removeImages, storeImages } from './multipart.ts';
import { outputAssetRows } from '../../../persistence/stores/files.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

/**
 * POST /openai/v1/images/generations and POST /openai/v1/images/edits (docs/openai-compatible.md): OpenAI's
 * image requests over the catalog's text_to_image and image_to_image models, each a generation of the key's
 * workspace, answered once it ends as OpenAI's `{ created, data: [{ b64_json } | { url }] }`.
 *
 * What maps to what:
 * - `prompt` → prompt; `n` → numImages; `user` → user (kept with the job, as chat keeps it);
 * - `size` → aspectRatio (SIZE_RATIOS): the size chooses the shape, the model its pixels. `auto` (or none)
 *   leaves the model's default;
 * - `response_format`: `b64_json` (our default, for every model: the bytes need no second request) or `url`, a
 *   signed link to the output asset that needs no credentials, valid URL_TTL_SECONDS (OpenAI's 60 minutes);
 * - `image` / `image[]` (edits): each file stored as an asset of the workspace, the job's `imageAssetIds`.
 *
 * A field the door cannot honour is refused naming its `param`, never dropped: an unknown one
 * (unknown_parameter), `stream: true`, `mask`, `style`, and any value of `quality`, `background`,
 * `moderation`, `output_format`, … other than the one that asks nothing of the model (unsupported_value).
 */

/** Signed output links (`response_format: 'url'`) work as long as OpenAI's do. */
export const URL_TTL_SECONDS = 60 * 60;
/** Input images of one edit at most: what an image_to_image job takes (generations/inputs.ts). */
const MAX_EDIT_IMAGES = 4;
const MAX_USER = 256;

type AspectRatio = (typeof ASPECT_RATIOS)[number];

/**
 * OpenAI's documented sizes onto our aspect ratios: its squares 1:1; DALL·E 3's 1792x1024 and 1024x1792 (7:4)
 * 16:9 and 9:16; the GPT image models' 1536x1024 and 1024x1536 (3:2) the nearest of ours, 4:3 and 3:4 (the
 * ratios the openai provider sends back as these very sizes). Any other `WxH` is taken only when its ratio is
 * exactly one of ours (1920x1080 is 16:9); any other is refused naming `size`.
 */
export const SIZE_RATIOS: Readonly<Record<string, AspectRatio>> = {
  '256x256': '1:1',
  '512x512': '1:1',
  '1024x1024': '1:1',
  '1792x1024': '16:9',
  '1024x1792': '9:16',
  '1536x1024': '4:3',
  '1024x1536': '3:4',
};

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** The aspect ratio a `size` asks for; undefined for `auto` or none (the model's default). */
export function aspectRatioOfSize(size: unknown): AspectRatio | undefined {
  if (size === undefined || size === null || size === 'auto') return undefined;
  if (typeof size !== 'string') throw invalid('size', "Invalid type for 'size': expected a string such as '1024x1024'.", 'invalid_type');
  const known = SIZE_RATIOS[size];
  if (known) return known;
  const match = /^([1-9]\d{0,4})x([1-9]\d{0,4})$/.exec(size);
  if (match) {
    const width = Number(match[1]);
    const height = Number(match[2]);
    const d = gcd(width, height);
    const ratio = `${width / d}:${height / d}`;
    if ((ASPECT_RATIOS as readonly string[]).includes(ratio)) return ratio as AspectRatio;
  }
  throw invalid(
    'size',
    `Invalid 'size': '${size.slice(0, 50)}' has no aspect ratio this service makes. Use 'auto', one of ${Object.keys(SIZE_RATIOS).join(', ')}, or a WxH of ratio ${ASPECT_RATIOS.join(', ')}.`,
  );
}

const isSet = (value: unknown) => value !== undefined && value !== null;

/** A field the door takes only with the values that ask nothing of the model (`auto`, the default), refused otherwise. */
function onlyValues(body: Record<string, unknown>, name: string, accepted: readonly unknown[], why: string): void {
  const value = body[name];
  if (!isSet(value) || accepted.includes(value)) return;
  throw invalid(name, `Unsupported value for '${name}': ${JSON.stringify(value).slice(0, 60)}. ${why}`, 'unsupported_value');
}

/** A field the door cannot honour at all: refused whenever it is given. */
function notTaken(body: Record<string, unknown>, name: string, why: string): void {
  if (isSet(body[name])) throw invalid(name, `Unsupported parameter: '${name}'. ${why}`, 'unsupported_parameter');
}

/** The model's catalog parameters (its parameterSchema's properties). */
export function offeredOf(model: ModelRecord): Set<string> {
  return new Set(Object.keys((model.parameterSchema as { properties?: Record<string, unknown> }).properties ?? {}));
}

export interface ImageJob {
  params: Record<string, unknown>;
  responseFormat: 'b64_json' | 'url';
}

const GENERATION_FIELDS = new Set([
  'model',
  'prompt',
  'n',
  'size',
  'response_format',
  'quality',
  'style',
  'user',
  'background',
  'moderation',
  'output_format',
  'output_compression',
  'partial_images',
  'stream',
]);
const EDIT_FIELDS = new Set([
  'model',
  'prompt',
  'n',
  'size',
  'response_format',
  'quality',
  'user',
  'background',
  'input_fidelity',
  'output_format',
  'output_compression',
  'partial_images',
  'stream',
]);

/** The job's params of an image request (fields as JSON types) for `model`, every field checked. */
export function imageJobOf(body: Record<string, unknown>, model: ModelRecord, fields: ReadonlySet<string>): ImageJob {
  refuseUnknown(body, fields);
  const offered = offeredOf(model);
  const params: Record<string, unknown> = {};

  const prompt = body.prompt;
  if (prompt === undefined || prompt === null) throw invalid('prompt', "Missing required parameter: 'prompt'.", 'missing_required_parameter');
  if (typeof prompt !== 'string') throw invalid('prompt', "Invalid type for 'prompt': expected a string.", 'invalid_type');
  if (prompt.trim() === '') throw invalid('prompt', "Invalid 'prompt': empty string.", 'empty_string');
  params.prompt = prompt;

  const n = body.n;
  if (isSet(n)) {
    if (typeof n !== 'number' || !Number.isInteger(n)) throw invalid('n', "Invalid type for 'n': expected an integer.", 'invalid_type');
    if (n < 1 || n > 10) throw invalid('n', `Invalid 'n': ${n} is not within 1 and 10.`);
    if (offered.has('numImages')) params.numImages = n;
    else if (n !== 1) throw invalid('n', `The model ${model.id} makes one image per request (n = 1).`, 'unsupported_value');
  }

  const ratio = aspectRatioOfSize(body.size);
  if (ratio !== undefined) {
    if (!offered.has('aspectRatio')) throw invalid('size', `The model ${model.id} takes no size; send 'auto' or none.`, 'unsupported_parameter');
    params.aspectRatio = ratio;
  }

  const format = body.response_format;
  if (isSet(format) && format !== 'b64_json' && format !== 'url') {
    throw invalid('response_format', "Invalid 'response_format': 'b64_json' or 'url'.", typeof format === 'string' ? 'invalid_value' : 'invalid_type');
  }

  if (isSet(body.user)) {
    if (typeof body.user !== 'string' || body.user.length > MAX_USER) throw invalid('user', `Invalid 'user': a string of at most ${MAX_USER} characters.`);
    params.user = body.user;
  }

  if (isSet(body.stream) && typeof body.stream !== 'boolean') throw invalid('stream', "Invalid type for 'stream': expected a boolean.", 'invalid_type');
  onlyValues(body, 'stream', [false], 'This service answers images whole, not streamed.');
  notTaken(body, 'partial_images', 'Partial images come with streaming, which this service does not do.');
  onlyValues(body, 'quality', ['auto', 'standard'], "The model's quality is its own: send 'auto' or none.");
  onlyValues(body, 'background', ['auto'], "The model's background is its own: send 'auto' or none.");
  onlyValues(body, 'moderation', ['auto'], "Send 'auto' or none.");
  onlyValues(body, 'output_format', ['png'], "This service's image models make PNG images: send 'png' or none.");
  notTaken(body, 'output_compression', 'It applies to JPEG and WEBP output only, and these models make PNG images.');
  if (fields.has('style')) notTaken(body, 'style', "The model's style is its own.");
  if (fields.has('input_fidelity')) notTaken(body, 'input_fidelity', "How much of the input is kept is the model's own.");
  return { params, responseFormat: format === 'url' ? 'url' : 'b64_json' };
}

/**
 * Checks a job's params against the model's parameterSchema before the job is made, so that a refusal names
 * the OpenAI field that set the param (`names`: ours → theirs) in its `param` and its message.
 */
export function checkDoorParams(services: Services, model: ModelRecord, params: Record<string, unknown>, names: Readonly<Record<string, string>>): void {
  const catalogParams = Object.fromEntries(Object.entries(params).filter(([name]) => !isChatParam(name)));
  const checked = services.catalog.checkParams(model.id, catalogParams);
  if (checked.ok) return;
  const name = /^params\.(\w+)/.exec(checked.message)?.[1];
  const param = name ? (names[name] ?? name) : null;
  const message = name ? checked.message.replace(/^params\.\w+/, `Invalid '${param}'`) : checked.message;
  throw new ParamError('validation_error', message, param, 'invalid_value');
}

/** A job of the door run to its end, followed in process: its generation as it ended, and the headers of the answer. */
export async function runDoorJob(
  services: Services,
  auth: Principal | undefined,
  request: { model: ModelRecord; params: Record<string, unknown>; body: unknown; idempotencyKey: string | undefined; inputs?: GenerationInputsIn },
): Promise<{ generation: Ended; replayed: boolean; headers: Record<string, string> }> {
  let ended: Ended | undefined;
  let onEnd: (() => void) | undefined;
  const started = await startDoorJob(services, auth, request, {
    output() {},
    end(generation) {
      ended = generation;
      onEnd?.();
    },
  });
  try {
    if (!ended) await new Promise<void>((resolve) => (onEnd = resolve));
  } finally {
    started.stop();
  }
  return {
    generation: ended!,
    replayed: started.replayed,
    headers: { 'X-Generation-Id': started.id, ...(started.replayed ? { 'Idempotent-Replayed': 'true' } : {}) },
  };
}

/** An output asset of a generation: where its bytes are and what they are. */
export interface OutputAsset {
  id: string;
  storageKey: string;
  contentType: string;
  bytes: number;
  name: string | null;
}

/** The output assets of a generation that succeeded, in its order. */
export async function outputAssetsOf(services: Services, generation: Ended): Promise<OutputAsset[]> {
  const ids = generation.outputAssetIds;
  if (ids.length === 0) return [];
  const rows = await outputAssetRows(openUnit(services.db), generation.workspaceId, ids);
  return ids.map((id) => {
    const row = rows.find((r) => r.id === id);
    if (!row) throw new ApiError('internal_error', `The output ${id} of the generation ${generation.id} is gone.`);
    return { id, storageKey: row.storage_key, contentType: row.content_type, bytes: Number(row.bytes), name: row.name };
  });
}

/** The bytes of an output asset, as a stream. */
export async function outputStream(services: Services, asset: OutputAsset): Promise<Readable> {
  const body = await services.blobs.get(asset.storageKey);
  if (!body) throw new ApiError('internal_error', `The bytes of the output ${asset.id} are gone.`);
  return body;
}

async function outputBytes(services: Services, asset: OutputAsset): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await outputStream(services, asset)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** OpenAI's ImagesResponse of a job that ended; its error answer if it did not succeed. */
async function imagesReply(services: Services, ran: Awaited<ReturnType<typeof runDoorJob>>, responseFormat: 'b64_json' | 'url'): Promise<Reply> {
  const { generation, headers } = ran;
  if (generation.status !== 'succeeded') return { ...failureReply(generation), headers };
  const assets = await outputAssetsOf(services, generation);
  const data = await Promise.all(
    assets.map(async (asset) => {
      if (responseFormat === 'b64_json') return { b64_json: (await outputBytes(services, asset)).toString('base64') };
      const link = await services.blobs.presignDownload(asset.storageKey, {
        contentType: asset.contentType,
        filename: asset.name ?? undefined,
        expiresInSeconds: URL_TTL_SECONDS,
      });
      return { url: link.url };
    }),
  );
  return { status: 200, headers, body: { created: Math.floor(Date.parse(generation.createdAt) / 1000), data } };
}

/** What a refusal of the catalog names, as OpenAI's image fields. */
const IMAGE_NAMES: Readonly<Record<string, string>> = { prompt: 'prompt', numImages: 'n', aspectRatio: 'size', user: 'user' };

const ERRORS = [
  'not_found',
  'conflict',
  'insufficient_credits',
  'wallet_insufficient_balance',
  'wallet_pending_minimum',
  'plan_limit_reached',
  'generation_paused',
] as const;
/** Every status a door job's answer may have (answers.ts, failureOf). */
const RESPONSES = { 200: null, 400: null, 409: null, 429: null, 502: null, 503: null, 504: null, 507: null };

export const createImages = defineRoute({
  method: 'POST',
  path: '/openai/v1/images/generations',
  operationId: 'openaiCreateImages',
  summary: "OpenAI's image generation over the catalog's text_to_image models",
  description:
    "The OpenAI-compatible door: takes OpenAI's image generation request (its `model` a text_to_image model id of GET /openai/v1/models; `size` chooses the aspect ratio) and answers `{created, data}` once the images are made, as base64 (default) or signed URLs. Each request is a generation of the key's workspace; errors come in OpenAI's shape. See docs/openai-compatible.md.",
  tags: ['openai'],
  access: { scopes: ['generations.write'] },
  keyWorkspace: 'none',
  errors: [...ERRORS],
  owner: keyWorkspace,
  body: Type.Object({}, { additionalProperties: true, description: "OpenAI's image generation request." }),
  responses: RESPONSES,
  handler: async ({ body, auth, headers, services }) => {
    keyOf(auth);
    const request = requestModelOf(body);
    const model = modelOf(services, request.model, ['text_to_image']);
    const job = imageJobOf(request.body, model, GENERATION_FIELDS);
    checkDoorParams(services, model, job.params, IMAGE_NAMES);
    const ran = await runDoorJob(services, auth, { model, params: job.params, body, idempotencyKey: headers['idempotency-key'] });
    return imagesReply(services, ran, job.responseFormat);
  },
});

/** Form fields are text: the numbers and booleans of an edit read back as the JSON request would carry them. */
function typedFields(fields: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...fields };
  for (const name of ['n', 'output_compression', 'partial_images']) {
    const value = fields[name];
    if (value !== undefined && /^-?\d{1,9}$/.test(value.trim())) out[name] = Number(value.trim());
  }
  const stream = fields.stream?.trim().toLowerCase();
  if (stream === 'true' || stream === 'false') out.stream = stream === 'true';
  return out;
}

export const createImageEdit = defineRoute({
  method: 'POST',
  path: '/openai/v1/images/edits',
  operationId: 'openaiCreateImageEdit',
  summary: "OpenAI's image edits over the catalog's image_to_image models (multipart/form-data)",
  description:
    "The OpenAI-compatible door: takes OpenAI's image edit request as multipart/form-data (`image` or `image[]` files, at most 4, `prompt`, `model` an image_to_image model id, …), stores each image as an asset of the key's workspace and answers `{created, data}` once the job ends. A request is at most 64 MiB, each image at most the plan's file size. Errors come in OpenAI's shape. See docs/openai-compatible.md.",
  tags: ['openai'],
  access: { scopes: ['generations.write'] },
  keyWorkspace: 'none',
  errors: [...ERRORS, 'payload_too_large'],
  rawBody: 'stream',
  responses: RESPONSES,
  handler: async (ctx) => {
    const { auth, headers, services } = ctx;
    const key = keyOf(auth);
    const { raw, form } = await readForm(ctx);
    // Cluster mode: the node that runs the key's workspace serves it, sent the very bytes received.
    const elsewhere = await placeReadBody(ctx, key.workspaceId, raw);
    if (elsewhere) return elsewhere;

    const fields: Record<string, string> = {};
    const files: File[] = [];
    for (const [name, value] of form.entries()) {
      if (name === 'image' || name === 'image[]') {
        if (typeof value === 'string') throw invalid('image', "Invalid type for 'image': expected a file.", 'invalid_type');
        files.push(value);
        continue;
      }
      if (name === 'mask')
        throw invalid('mask', "Unsupported parameter: 'mask'. The image_to_image models of this service edit the whole image.", 'unsupported_parameter');
      if (typeof value !== 'string') {
        if (!EDIT_FIELDS.has(name)) throw invalid(name, `Unrecognized request argument supplied: ${name}`, 'unknown_parameter');
        throw invalid(name, `Invalid type for '${name}': expected a value, not a file.`, 'invalid_type');
      }
      if (fields[name] !== undefined) throw invalid(name, `Invalid '${name}': given more than once.`);
      fields[name] = value;
    }
    const body = typedFields(fields);
    const request = requestModelOf(body);
    const model = modelOf(services, request.model, ['image_to_image']);
    const job = imageJobOf(request.body, model, EDIT_FIELDS);
    if (files.length === 0) throw invalid('image', "Missing required parameter: 'image'.", 'missing_required_parameter');
    if (files.length > MAX_EDIT_IMAGES) throw invalid('image', `Invalid 'image': at most ${MAX_EDIT_IMAGES} images.`, 'array_above_max_length');
    checkDoorParams(services, model, job.params, IMAGE_NAMES);

    const { workspace } = await openWorkspace(openUnit(services.db), auth, key.workspaceId);
    const plan = services.catalog.plan(workspace.plan);
    const images = await checkImages(files, 'image', plan);
    // What an Idempotency-Key compares: the fields and the images' bytes (not the asset ids each request makes).
    const idempotent = { ...fields, images: images.map((image) => createHash('sha256').update(image.bytes).digest('hex')) };
    const assetIds = await storeImages(services, key.workspaceId, plan, images, 'image');
    let ran: Awaited<ReturnType<typeof runDoorJob>>;
    try {
      ran = await runDoorJob(services, auth, {
        model,
        params: job.params,
        body: idempotent,
        idempotencyKey: headers['idempotency-key'],
        inputs: { imageAssetIds: assetIds },
      });
    } catch (error) {
      await removeImages(services, key.workspaceId, assetIds);
      throw error;
    }
    // A replay answers the first job, made of the first request's images: this request's are not kept.
    if (ran.replayed) await removeImages(services, key.workspaceId, assetIds);
    return imagesReply(services, ran, job.responseFormat);
  },
});

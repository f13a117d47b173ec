/**
 * A strict fake of OpenAI's API for the `openai` adapter's tests: POST /v1/chat/completions,
 * /v1/images/generations, /v1/images/edits (multipart) and /v1/audio/speech, plus GET /files/<name> for
 * image URLs it hands out (as DALL·E's expiring blob URLs).
 *
 * Built from:
 * - the API reference, https://platform.openai.com/docs/api-reference (chat/create, images/create,
 *   images/createEdit, audio/createSpeech; "Authentication", "Debugging requests") and the error-code guide,
 *   https://platform.openai.com/docs/guides/error-codes (401 invalid_api_key, 429 rate_limit_exceeded and
 *   insufficient_quota, 500 server_error, 503 overloaded);
 * - openai-node 6.30.1: src/resources/chat/completions/completions.ts (ChatCompletion, CompletionUsage,
 *   finish_reason), src/resources/images.ts (ImageGenerateParams, ImageEditParams: sizes and models,
 *   response_format only for DALL·E, ImagesResponse with usage for the GPT image models),
 *   src/resources/audio/speech.ts (voices, response_format mp3/opus/aac/flac/wav/pcm, speed 0.25-4),
 *   src/internal/uploads.ts (an array of files goes as `image[]`), src/client.ts (retry-after-ms, Retry-After);
 * - error bodies as OpenAI answers them: "Unknown parameter: 'response_format'." (400 unknown_parameter) for
 *   the GPT image models, "Invalid Content-Type header (application/json), expected multipart/form-data." for
 *   the edits, content_policy_violation / moderation_blocked for refused prompts, "Invalid URL (POST /v1/x)".
 *
 * Opus comes in an Ogg container. Audio and images are real files (ffmpeg, PNG) so that tests can decode them.
 * It counts submissions per X-Client-Request-Id, and misbehaves on demand, one queued behaviour per call
 * (`next(path, behaviour)`).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { makePng } from '../helpers/files.ts';
import { fixture } from '../providers/support.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import type { AdapterContext, AdapterJob, InputFile } from '../../providers/adapter.ts';
import { guardedFetcher } from '../../runtime/egress.ts';
import type { Mode } from '../../domain/catalog/models.ts';

export type FakePath = '/chat/completions' | '/images/generations' | '/images/edits' | '/audio/speech';

export type Behaviour =
  | { kind: 'rate-limit'; retryAfter?: string; retryAfterMs?: string; code?: 'rate_limit_exceeded' | 'insufficient_quota' }
  | { kind: 'status'; status: number; body?: unknown; text?: string }
  | { kind: 'server-error' }
  | { kind: 'overloaded' }
  | { kind: 'content-policy' }
  | { kind: 'moderation-blocked' }
  | { kind: 'content-filter' }
  | { kind: 'hang' }
  | { kind: 'malformed-json' }
  | { kind: 'oversized'; bytes: number }
  | { kind: 'image-urls'; expired?: boolean }
  | { kind: 'fewer-images' }
  | { kind: 'wrong-audio' }
  | { kind: 'echo-key' };

export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON body, or the multipart fields (files as { name, type, bytes }). */
  body: Record<string, unknown> | undefined;
  contentType: string;
}

export interface UploadedFile {
  filename: string;
  type: string;
  bytes: Buffer;
}

export interface FakeOpenAi {
  /** The base URL the adapter is given (…/v1). */
  url: string;
  apiKey: string;
  organization: string;
  received: Received[];
  /** Requests that reached a generation endpoint, by X-Client-Request-Id. */
  submissions: Map<string, number>;
  /** The usage the fake reported for each chat answer, by X-Client-Request-Id. */
  usage: Map<string, { prompt_tokens: number; completion_tokens: number }>;
  /** Hanging answers whose connection the client closed (a cancel or a time-out). */
  closedEarly(): number;
  next(path: FakePath, behaviour: Behaviour): void;
  close(): Promise<void>;
}

const CHAT_MODELS = ['gpt-4o-mini', 'gpt-4o', 'gpt-4.1-mini', 'o3-mini', 'o4-mini', 'gpt-5-mini'];
const REASONING = /^(o\d|gpt-5)/;
const CHAT_FIELDS = new Set([
  'model',
  'messages',
  'temperature',
  'top_p',
  'max_tokens',
  'max_completion_tokens',
  'seed',
  'n',
  'stop',
  'user',
  'stream',
  'stream_options',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'response_format',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'store',
  'metadata',
  'reasoning_effort',
  'service_tier',
  'modalities',
  'audio',
  'prediction',
  'safety_identifier',
  'prompt_cache_key',
  'verbosity',
]);
const IMAGE_MODELS = ['dall-e-2', 'dall-e-3', 'gpt-image-1', 'gpt-image-1-mini', 'gpt-image-1.5'];
const GPT_IMAGE = /^gpt-image/;
const IMAGE_FIELDS = new Set([
  'prompt',
  'model',
  'n',
  'size',
  'quality',
  'style',
  'response_format',
  'background',
  'moderation',
  'output_compression',
  'output_format',
  'partial_images',
  'stream',
  'user',
]);
const EDIT_FIELDS = new Set([
  'image',
  'image[]',
  'mask',
  'prompt',
  'model',
  'n',
  'size',
  'quality',
  'response_format',
  'background',
  'input_fidelity',
  'output_compression',
  'output_format',
  'partial_images',
  'stream',
  'user',
]);
const SIZES: Record<string, string[]> = {
  'dall-e-2': ['256x256', '512x512', '1024x1024'],
  'dall-e-3': ['1024x1024', '1792x1024', '1024x1792'],
  gpt: ['1024x1024', '1536x1024', '1024x1536', 'auto'],
};
const QUALITIES: Record<string, string[]> = { 'dall-e-2': ['standard'], 'dall-e-3': ['standard', 'hd'], gpt: ['low', 'medium', 'high', 'auto'] };
const TTS_MODELS = ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts'];
const TTS_VOICES = ['alloy', 'ash', 'coral', 'echo', 'fable', 'onyx', 'nova', 'sage', 'shimmer'];
const TTS_VOICES_NEW = [...TTS_VOICES, 'ballad', 'verse', 'marin', 'cedar'];
const SPEECH_FIELDS = new Set(['model', 'input', 'voice', 'instructions', 'response_format', 'speed', 'stream_format']);
const AUDIO: Record<string, { type: string; args: string[] }> = {
  mp3: { type: 'audio/mpeg', args: ['-c:a', 'libmp3lame', '-f', 'mp3'] },
  opus: { type: 'audio/opus', args: ['-c:a', 'libopus', '-f', 'ogg'] },
  wav: { type: 'audio/wav', args: ['-f', 'wav'] },
  aac: { type: 'audio/aac', args: ['-c:a', 'aac', '-f', 'adts'] },
  flac: { type: 'audio/flac', args: ['-f', 'flac'] },
  pcm: { type: 'audio/pcm', args: ['-f', 's16le'] },
};

const audioCache = new Map<string, Promise<Buffer>>();
function audioOf(format: string): Promise<Buffer> {
  let made = audioCache.get(format);
  if (!made) {
    made = fixture('sine=frequency=440:sample_rate=24000:duration=0.3', ['-ac', '1', ...AUDIO[format]!.args]);
    audioCache.set(format, made);
  }
  return made;
}

class Refusal {
  constructor(
    readonly status: number,
    readonly message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly type = 'invalid_request_error',
  ) {}
}

const invalid = (param: string, message: string, code = 'invalid_value') => new Refusal(400, message, param, code);

export async function startFakeOpenAi(options: { apiKey?: string; organization?: string } = {}): Promise<FakeOpenAi> {
  const apiKey = options.apiKey ?? 'sk-fake-0123456789abcdefSECRET';
  const organization = options.organization ?? 'org-fake';
  const received: Received[] = [];
  const submissions = new Map<string, number>();
  const usage = new Map<string, { prompt_tokens: number; completion_tokens: number }>();
  const queued = new Map<FakePath, Behaviour[]>();
  const files = new Map<string, Buffer>();
  const hanging = new Set<http.ServerResponse>();
  let closedEarly = 0;
  let fileCounter = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks)).catch((error: unknown) => {
        if (!res.headersSent) json(res, 500, errorBody(new Refusal(500, `fake failure: ${(error as Error).message}`, null, null, 'server_error')));
      });
    });
  });

  function json(res: http.ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) {
    const body = JSON.stringify(value);
    res
      .writeHead(status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'x-request-id': `req_${Math.random().toString(16).slice(2)}`,
        ...headers,
      })
      .end(body);
  }

  function errorBody(refusal: Refusal) {
    return { error: { message: refusal.message, type: refusal.type, param: refusal.param, code: refusal.code } };
  }

  function base(): string {
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const method = req.method ?? 'GET';
    if (url.pathname.startsWith('/files/')) {
      const file = files.get(url.pathname.slice('/files/'.length));
      if (method !== 'GET' || !file) {
        res
          .writeHead(404, { 'content-type': 'application/xml' })
          .end('<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code><Message>Signed expiry time has passed.</Message></Error>');
        return;
      }
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': file.length }).end(file);
      return;
    }
    const path = url.pathname.replace(/^\/v1/, '') as FakePath;
    const known = ['/chat/completions', '/images/generations', '/images/edits', '/audio/speech'].includes(path) && url.pathname.startsWith('/v1/');
    if (!known) return json(res, 404, errorBody(new Refusal(404, `Invalid URL (${method} ${url.pathname})`)));
    if (method !== 'POST') return json(res, 405, errorBody(new Refusal(405, `Invalid method for URL (${method} ${url.pathname})`)));

    const authorization = req.headers.authorization;
    if (!authorization) {
      return json(
        res,
        401,
        errorBody(
          new Refusal(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys.",
          ),
        ),
      );
    }
    const presented = /^Bearer (.+)$/.exec(authorization)?.[1];
    if (presented !== apiKey) {
      const masked = presented ? `${presented.slice(0, 6)}${'*'.repeat(Math.max(0, presented.length - 10))}${presented.slice(-4)}` : '';
      return json(
        res,
        401,
        errorBody(
          new Refusal(
            401,
            `Incorrect API key provided: ${masked}. You can find your API key at https://platform.openai.com/account/api-keys.`,
            null,
            'invalid_api_key',
          ),
        ),
      );
    }
    const org = req.headers['openai-organization'];
    if (org !== undefined && org !== organization) {
      return json(res, 401, errorBody(new Refusal(401, 'OpenAI-Organization header should match organization for API key', null, 'mismatched_organization')));
    }

    const contentType = String(req.headers['content-type'] ?? '');
    const clientId = String(req.headers['x-client-request-id'] ?? '');
    submissions.set(clientId, (submissions.get(clientId) ?? 0) + 1);
    let body: Record<string, unknown> | undefined;
    try {
      body = path === '/images/edits' ? await multipartBody(contentType, raw) : jsonBody(contentType, raw);
    } catch (error) {
      if (error instanceof Refusal) return json(res, error.status, errorBody(error));
      throw error;
    }
    received.push({ method, path, headers: req.headers, body, contentType });

    const behaviour = queued.get(path)?.shift();
    if (behaviour && (await misbehave(behaviour, path, body, res))) return;

    try {
      switch (path) {
        case '/chat/completions':
          return json(res, 200, chat(body, clientId, behaviour));
        case '/images/generations':
          return json(res, 200, generate(body, behaviour));
        case '/images/edits':
          return json(res, 200, edit(body, behaviour));
        case '/audio/speech': {
          const { bytes, type } = await speech(body, behaviour);
          res.writeHead(200, { 'content-type': type, 'content-length': bytes.length }).end(bytes);
          return;
        }
      }
    } catch (error) {
      if (error instanceof Refusal) return json(res, error.status, errorBody(error));
      throw error;
    }
  }

  function jsonBody(contentType: string, raw: Buffer): Record<string, unknown> {
    if (!/^application\/json\b/i.test(contentType)) {
      throw new Refusal(
        400,
        `Unsupported content type: '${contentType.split(';')[0]}'. This API method only accepts 'application/json' requests, but you specified the header 'Content-Type: ${contentType.split(';')[0]}'. Please try again with a supported content type.`,
        null,
        'unsupported_content_type',
      );
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new Refusal(
        400,
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)",
      );
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Refusal(400, 'The request body must be a JSON object.');
    return parsed as Record<string, unknown>;
  }

  async function multipartBody(contentType: string, raw: Buffer): Promise<Record<string, unknown>> {
    const mime = contentType.split(';')[0]!.trim();
    if (mime !== 'multipart/form-data') {
      throw new Refusal(
        400,
        `Invalid Content-Type header (${mime || 'none'}), expected multipart/form-data. (HINT: If you're using curl, you can pass -H 'Content-Type: multipart/form-data')`,
      );
    }
    let form: FormData;
    try {
      form = await new Response(raw, { headers: { 'content-type': contentType } }).formData();
    } catch {
      throw new Refusal(400, 'Could not parse multipart form');
    }
    const fields: Record<string, unknown> = {};
    for (const [name, value] of form.entries()) {
      const item =
        typeof value === 'string' ? value : ({ filename: value.name, type: value.type, bytes: Buffer.from(await value.arrayBuffer()) } satisfies UploadedFile);
      if (name === 'image[]') {
        const list = (fields[name] as unknown[] | undefined) ?? [];
        list.push(item);
        fields[name] = list;
      } else if (name in fields) throw invalid(name, `Duplicate parameter: '${name}'.`, 'duplicate_parameter');
      else fields[name] = item;
    }
    return fields;
  }

  function unknownFields(body: Record<string, unknown>, allowed: Set<string>) {
    for (const name of Object.keys(body)) if (!allowed.has(name)) throw invalid(name, `Unknown parameter: '${name}'.`, 'unknown_parameter');
  }

  function required(body: Record<string, unknown>, name: string) {
    if (body[name] === undefined || body[name] === '') throw invalid(name, `Missing required parameter: '${name}'.`, 'missing_required_parameter');
  }

  function modelNotFound(model: unknown): Refusal {
    return new Refusal(404, `The model \`${String(model)}\` does not exist or you do not have access to it.`, null, 'model_not_found');
  }

  const tokens = (text: string) => Math.max(1, Math.ceil(text.length / 4));

  function chat(body: Record<string, unknown>, clientId: string, behaviour: Behaviour | undefined) {
    unknownFields(body, CHAT_FIELDS);
    required(body, 'model');
    required(body, 'messages');
    const model = String(body.model);
    if (!CHAT_MODELS.includes(model)) throw modelNotFound(model);
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0)
      throw invalid('messages', "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'empty_array');
    for (const [i, m] of messages.entries()) {
      const message = m as { role?: unknown; content?: unknown };
      if (!['system', 'developer', 'user', 'assistant', 'tool'].includes(String(message?.role)))
        throw invalid(
          `messages[${i}].role`,
          `Invalid value: '${String(message?.role)}'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.`,
        );
      if (typeof message.content !== 'string' && !Array.isArray(message.content))
        throw invalid(
          `messages[${i}].content`,
          `Invalid type for 'messages[${i}].content': expected one of a string or array of objects, but got ${typeof message.content} instead.`,
          'invalid_type',
        );
    }
    if (body.temperature !== undefined) {
      if (typeof body.temperature !== 'number')
        throw invalid('temperature', `Invalid type for 'temperature': expected a decimal, but got ${typeof body.temperature} instead.`, 'invalid_type');
      if (body.temperature > 2)
        throw invalid(
          'temperature',
          `Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got ${body.temperature} instead.`,
          'decimal_above_max_value',
        );
      if (body.temperature < 0)
        throw invalid(
          'temperature',
          `Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got ${body.temperature} instead.`,
          'decimal_below_min_value',
        );
      if (REASONING.test(model) && body.temperature !== 1)
        throw invalid(
          'temperature',
          `Unsupported value: 'temperature' does not support ${body.temperature} with this model. Only the default (1) value is supported.`,
          'unsupported_value',
        );
    }
    if (REASONING.test(model) && body.max_tokens !== undefined) {
      throw invalid(
        'max_tokens',
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        'unsupported_parameter',
      );
    }
    for (const name of ['max_tokens', 'max_completion_tokens', 'seed']) {
      if (body[name] !== undefined && !Number.isInteger(body[name]))
        throw invalid(name, `Invalid type for '${name}': expected an integer, but got ${typeof body[name]} instead.`, 'invalid_type');
    }
    const last = messages[messages.length - 1] as { content: unknown };
    let content = `echo: ${typeof last.content === 'string' ? last.content : JSON.stringify(last.content)}`;
    const limit = (body.max_completion_tokens ?? body.max_tokens) as number | undefined;
    let finish = 'stop';
    if (limit !== undefined && tokens(content) > limit) {
      content = content.slice(0, limit * 4);
      finish = 'length';
    }
    if (behaviour?.kind === 'content-filter') {
      content = '';
      finish = 'content_filter';
    }
    const counted = {
      prompt_tokens: messages.reduce((sum: number, m) => sum + tokens(String((m as { content: unknown }).content)) + 4, 0),
      completion_tokens: tokens(content),
    };
    usage.set(clientId, counted);
    return {
      id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: `${model}-2024-07-18`,
      choices: [{ index: 0, message: { role: 'assistant', content, refusal: null, annotations: [] }, logprobs: null, finish_reason: finish }],
      usage: {
        ...counted,
        total_tokens: counted.prompt_tokens + counted.completion_tokens,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
      },
      service_tier: 'default',
      system_fingerprint: 'fp_fake',
    };
  }

  function family(model: string) {
    return GPT_IMAGE.test(model) ? 'gpt' : model;
  }

  function imageOptions(body: Record<string, unknown>, action: 'generations' | 'edits') {
    const model = String(body.model ?? (action === 'edits' ? 'gpt-image-1.5' : 'dall-e-2'));
    if (!IMAGE_MODELS.includes(model)) throw modelNotFound(model);
    if (action === 'edits' && model === 'dall-e-3')
      throw invalid('model', "Invalid value: 'dall-e-3'. Image edits support 'dall-e-2' and the GPT image models.");
    const fam = family(model);
    if (action === 'generations' && body.n !== undefined && typeof body.n !== 'number')
      throw invalid('n', `Invalid type for 'n': expected an integer, but got ${typeof body.n} instead.`, 'invalid_type');
    const n = body.n === undefined ? 1 : Number(body.n);
    if (!Number.isInteger(n) || n < 1)
      throw invalid('n', `Invalid 'n': integer below minimum value. Expected a value >= 1, but got ${String(body.n)} instead.`, 'integer_below_min_value');
    if (n > 10) throw invalid('n', `Invalid 'n': integer above maximum value. Expected a value <= 10, but got ${n} instead.`, 'integer_above_max_value');
    if (model === 'dall-e-3' && n !== 1) throw invalid('n', 'You must provide n=1 for this model.');
    const size = String(body.size ?? (fam === 'gpt' ? 'auto' : '1024x1024'));
    const sizes = SIZES[fam]!;
    if (!sizes.includes(size)) throw invalid('size', `Invalid value: '${size}'. Supported values are: ${sizes.map((s) => `'${s}'`).join(', ')}.`);
    if (body.response_format !== undefined) {
      if (fam === 'gpt') throw invalid('response_format', "Unknown parameter: 'response_format'.", 'unknown_parameter');
      if (!['url', 'b64_json'].includes(String(body.response_format)))
        throw invalid('response_format', `Invalid value: '${String(body.response_format)}'. Supported values are: 'url' and 'b64_json'.`);
    }
    if (body.quality !== undefined && !QUALITIES[fam]!.includes(String(body.quality)))
      throw invalid('quality', `Invalid value: '${String(body.quality)}'. Supported values are: ${QUALITIES[fam]!.map((q) => `'${q}'`).join(', ')}.`);
    if (body.style !== undefined && model !== 'dall-e-3') throw invalid('style', "Unknown parameter: 'style'.", 'unknown_parameter');
    if (typeof body.prompt !== 'string' || body.prompt === '') throw invalid('prompt', "Missing required parameter: 'prompt'.", 'missing_required_parameter');
    const maxPrompt = model === 'dall-e-2' ? 1000 : model === 'dall-e-3' ? 4000 : 32000;
    if (body.prompt.length > maxPrompt)
      throw invalid(
        'prompt',
        `Invalid 'prompt': string too long. Expected a string with maximum length ${maxPrompt}, but got a string with length ${body.prompt.length} instead.`,
        'string_above_max_length',
      );
    const [w, h] = (size === 'auto' ? '1024x1024' : size).split('x').map(Number) as [number, number];
    const asUrl = fam !== 'gpt' && (body.response_format ?? 'url') === 'url';
    return { model, fam, n, size, width: w, height: h, asUrl };
  }

  function imagesAnswer(o: ReturnType<typeof imageOptions>, prompt: string, behaviour: Behaviour | undefined) {
    const count = behaviour?.kind === 'fewer-images' ? o.n - 1 : o.n;
    const urls = o.asUrl || behaviour?.kind === 'image-urls';
    const data = Array.from({ length: count }, () => {
      const png = makePng(o.width, o.height);
      if (!urls) return { b64_json: png.toString('base64'), ...(o.model === 'dall-e-3' ? { revised_prompt: prompt } : {}) };
      const name = `img-${++fileCounter}.png`;
      if (!(behaviour?.kind === 'image-urls' && behaviour.expired)) files.set(name, png);
      return { url: `${base()}/files/${name}?se=2030-01-01&sig=fake`, ...(o.model === 'dall-e-3' ? { revised_prompt: prompt } : {}) };
    });
    return {
      created: Math.floor(Date.now() / 1000),
      data,
      ...(o.fam === 'gpt'
        ? {
            background: 'opaque',
            output_format: 'png',
            quality: 'medium',
            size: o.size === 'auto' ? '1024x1024' : o.size,
            usage: {
              input_tokens: tokens(prompt),
              input_tokens_details: { text_tokens: tokens(prompt), image_tokens: 0 },
              output_tokens: 272 * o.n,
              total_tokens: tokens(prompt) + 272 * o.n,
            },
          }
        : {}),
    };
  }

  function generate(body: Record<string, unknown>, behaviour: Behaviour | undefined) {
    unknownFields(body, IMAGE_FIELDS);
    const options = imageOptions(body, 'generations');
    return imagesAnswer(options, String(body.prompt), behaviour);
  }

  function edit(body: Record<string, unknown>, behaviour: Behaviour | undefined) {
    unknownFields(body, EDIT_FIELDS);
    for (const name of ['n', 'size', 'model', 'prompt', 'quality', 'response_format']) {
      if (body[name] !== undefined && typeof body[name] !== 'string')
        throw invalid(name, `Invalid type for '${name}': expected a string, but got a file instead.`, 'invalid_type');
    }
    const images = [...(body.image !== undefined ? [body.image] : []), ...((body['image[]'] as unknown[] | undefined) ?? [])];
    if (images.length === 0) throw invalid('image', "Missing required parameter: 'image'.", 'missing_required_parameter');
    if (body.image !== undefined && body['image[]'] !== undefined) throw invalid('image', "Provide either 'image' or 'image[]', not both.");
    const options = imageOptions(body, 'edits');
    const accepted = options.fam === 'gpt' ? ['image/png', 'image/jpeg', 'image/webp'] : ['image/png'];
    if (options.fam !== 'gpt' && images.length > 1) throw invalid('image', 'dall-e-2 takes one image.');
    if (images.length > 16) throw invalid('image', 'You can provide up to 16 images.');
    let first: { width: number; height: number } | undefined;
    for (const item of images) {
      if (typeof item === 'string')
        throw invalid('image', "Invalid type for 'image': expected one of an array of files or file, but got a string instead.", 'invalid_type');
      const file = item as UploadedFile;
      if (!accepted.includes(file.type))
        throw invalid(
          'image',
          `Invalid file 'image': unsupported mimetype ('${file.type}'). Supported file formats are ${accepted.map((a) => `'${a}'`).join(', ')}.`,
          'invalid_image_format',
        );
      if (sniffContentType(file.bytes) !== file.type)
        throw invalid('image', 'Invalid image file or mode for image, please check your image file.', 'invalid_image');
      const size = imageDimensions(file.bytes);
      if (options.fam !== 'gpt' && (file.bytes.length > 4 * 1024 * 1024 || size?.width !== size?.height))
        throw invalid('image', 'Uploaded image must be a PNG, square and less than 4 MB.', 'invalid_image');
      first ??= size;
    }
    if (body.mask !== undefined) {
      const mask = body.mask as UploadedFile | string;
      if (typeof mask === 'string') throw invalid('mask', "Invalid type for 'mask': expected a file, but got a string instead.", 'invalid_type');
      if (mask.type !== 'image/png')
        throw invalid('mask', `Invalid file 'mask': unsupported mimetype ('${mask.type}'). Supported file formats are 'image/png'.`, 'invalid_image_format');
      if (sniffContentType(mask.bytes) !== 'image/png') throw invalid('mask', 'Invalid mask file: it is not a PNG.', 'invalid_image');
      const size = imageDimensions(mask.bytes);
      if (!size || !first || size.width !== first.width || size.height !== first.height)
        throw invalid('mask', 'Invalid mask image: the mask and the image must have the same dimensions.', 'invalid_image');
    }
    return imagesAnswer(options, String(body.prompt), behaviour);
  }

  async function speech(body: Record<string, unknown>, behaviour: Behaviour | undefined): Promise<{ bytes: Buffer; type: string }> {
    unknownFields(body, SPEECH_FIELDS);
    required(body, 'model');
    required(body, 'input');
    required(body, 'voice');
    const model = String(body.model);
    if (!TTS_MODELS.includes(model)) throw modelNotFound(model);
    if (typeof body.input !== 'string')
      throw invalid('input', `Invalid type for 'input': expected a string, but got ${typeof body.input} instead.`, 'invalid_type');
    if (body.input.length > 4096)
      throw invalid(
        'input',
        `Invalid 'input': string too long. Expected a string with maximum length 4096, but got a string with length ${body.input.length} instead.`,
        'string_above_max_length',
      );
    const voices = model === 'gpt-4o-mini-tts' ? TTS_VOICES_NEW : TTS_VOICES;
    if (!voices.includes(String(body.voice)))
      throw invalid('voice', `Invalid value: '${String(body.voice)}'. Supported values are: ${voices.map((v) => `'${v}'`).join(', ')}.`);
    const format = String(body.response_format ?? 'mp3');
    if (!AUDIO[format]) throw invalid('response_format', `Invalid value: '${format}'. Supported values are: 'mp3', 'opus', 'aac', 'flac', 'wav', and 'pcm'.`);
    if (body.speed !== undefined && (typeof body.speed !== 'number' || body.speed < 0.25 || body.speed > 4))
      throw invalid('speed', `Invalid 'speed': expected a value between 0.25 and 4, but got ${String(body.speed)} instead.`);
    if (body.instructions !== undefined && model !== 'gpt-4o-mini-tts')
      throw invalid('instructions', 'Instructions are not supported with this model.', 'unsupported_parameter');
    const served = behaviour?.kind === 'wrong-audio' ? (format === 'wav' ? 'mp3' : 'wav') : format;
    return { bytes: await audioOf(served), type: AUDIO[format]!.type };
  }

  /** Answers as told instead of normally; false when the behaviour only alters the normal answer. */
  async function misbehave(behaviour: Behaviour, path: FakePath, body: Record<string, unknown> | undefined, res: http.ServerResponse): Promise<boolean> {
    switch (behaviour.kind) {
      case 'rate-limit': {
        const code = behaviour.code ?? 'rate_limit_exceeded';
        const message =
          code === 'insufficient_quota'
            ? 'You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.'
            : `Rate limit reached for ${String(body?.model)} in organization ${organization} on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more.`;
        json(res, 429, errorBody(new Refusal(429, message, null, code, code === 'insufficient_quota' ? 'insufficient_quota' : 'requests')), {
          ...(behaviour.retryAfter !== undefined ? { 'retry-after': behaviour.retryAfter } : {}),
          ...(behaviour.retryAfterMs !== undefined ? { 'retry-after-ms': behaviour.retryAfterMs } : {}),
          'x-ratelimit-limit-requests': '3',
          'x-ratelimit-remaining-requests': '0',
          'x-ratelimit-reset-requests': '20s',
        });
        return true;
      }
      case 'status':
        if (behaviour.text !== undefined) res.writeHead(behaviour.status, { 'content-type': 'text/html' }).end(behaviour.text);
        else json(res, behaviour.status, behaviour.body ?? {});
        return true;
      case 'server-error':
        json(res, 500, errorBody(new Refusal(500, 'The server had an error while processing your request. Sorry about that!', null, null, 'server_error')));
        return true;
      case 'overloaded':
        json(res, 503, errorBody(new Refusal(503, 'The engine is currently overloaded, please try again later.', null, null, 'server_error')));
        return true;
      case 'content-policy':
        json(
          res,
          400,
          errorBody(
            new Refusal(
              400,
              'Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.',
              null,
              'content_policy_violation',
            ),
          ),
        );
        return true;
      case 'moderation-blocked':
        json(
          res,
          400,
          errorBody(
            new Refusal(
              400,
              'Your request was rejected by the safety system. If you believe this is an error, contact us at help.openai.com and include the request ID req_fake. safety_violations=[violence].',
              null,
              'moderation_blocked',
              'image_generation_user_error',
            ),
          ),
        );
        return true;
      case 'echo-key':
        // Some compatible servers quote the Authorization header back; nothing of the key may reach a job's error.
        json(res, 400, errorBody(new Refusal(400, `Bad request with Authorization: Bearer ${apiKey} (key ${apiKey})`)));
        return true;
      case 'hang':
        hanging.add(res);
        res.on('close', () => {
          if (hanging.delete(res)) closedEarly++;
        });
        return true;
      case 'malformed-json':
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"id": "chatcmpl-1", "object": "chat.completion", "choices": [');
        return true;
      case 'oversized': {
        const type = path === '/audio/speech' ? 'audio/mpeg' : 'application/json';
        // No content-length: the size shows only while reading, as with a chunked answer.
        res.writeHead(200, { 'content-type': type });
        const chunk = Buffer.alloc(64 * 1024, 0x41);
        let sent = 0;
        const write = () => {
          while (sent < behaviour.bytes) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', write);
          }
          res.end();
        };
        res.on('error', () => undefined);
        write();
        return true;
      }
      default:
        return false;
    }
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `${base()}/v1`,
    apiKey,
    organization,
    received,
    submissions,
    usage,
    closedEarly: () => closedEarly,
    next(path, behaviour) {
      const list = queued.get(path) ?? [];
      list.push(behaviour);
      queued.set(path, list);
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** An AdapterContext for tests: output URLs through the real egress guard, narrowed to the fake's address. */
export function testContext(overrides: Partial<AdapterContext> = {}): AdapterContext {
  const maxOutputBytes = overrides.maxOutputBytes ?? 8 * 1024 * 1024;
  return {
    fetchOutput: guardedFetcher({ allowAddress: (a) => a === '127.0.0.1', maxBytes: maxOutputBytes, timeoutMs: 2_000 }),
    maxResponseBytes: 16 * 1024 * 1024,
    maxOutputBytes,
    pollIntervalMs: 30,
    requestTimeoutMs: 2_000,
    now: () => Date.now(),
    ...overrides,
  };
}

export function jobFor(
  mode: Mode,
  params: Record<string, unknown> = {},
  inputs: { images?: InputFile[]; mask?: InputFile } = {},
  deadlineMs = 10_000,
): AdapterJob {
  return {
    generationId: `gen_${Math.random().toString(36).slice(2)}`,
    mode,
    modelId: `openai/${mode}`,
    params: { prompt: 'a lighthouse at dawn', ...params },
    input: {},
    inputs: { images: inputs.images ?? [], videos: [], ...(inputs.mask ? { mask: inputs.mask } : {}) },
    deadline: Date.now() + deadlineMs,
  };
}

export { recorder } from '../helpers/updates.ts';

/**
 * A strict fake of OpenAI's API for the `openai` adapter's tests: POST /v1/chat/completions (answered whole or streamed),
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
 * - chat streaming (`stream: true`): the `chat.completion.chunk` events of OpenAI's recorded streams in
 *   openai-node's tests/lib/__snapshots__/ChatCompletionStream.test.ts.snap (`data: {json}` and a blank line
 *   each; the same id, created, model and system_fingerprint in every chunk; a first delta
 *   `{ role: 'assistant', content: '' }`, a delta `{ content }` per piece, an empty delta with the
 *   finish_reason, then a chunk with `choices: []` and the usage, then `data: [DONE]`); ChatCompletionStreamOptions
 *   in openai-node src/resources/chat/completions/completions.ts ("If set, an additional chunk will be streamed
 *   before the `data: [DONE]` message … the `choices` field will always be an empty array. All other chunks
 *   will also include a `usage` field, but with a null value"); the refusal of `stream_options` without
 *   `stream` as OpenAI answers it (quoted in BerriAI/litellm#5803: "The 'stream_options' parameter is only
 *   allowed when 'stream' is enabled.", param stream_options, code null); an error after the 200 as an event
 *   `data: {"error": {message, type, param, code}}` followed by `data: [DONE]` (quoted in
 *   sashabaranov/go-openai#396), which openai-node's src/core/streaming.ts throws as an APIError;
 * - chat requests: ChatCompletionCreateParams and the message params by role in openai-node's completions.ts
 *   (a tool message answers an assistant message's tool_calls by tool_call_id; stop "not supported with
 *   latest reasoning models o3 and o4-mini", at most 4), and OpenAI's refusals of them as quoted in issues:
 *   "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
 *   (writer/writer-framework#1013), "Invalid parameter: messages with role 'tool' must be a response to a
 *   preceeding message with 'tool_calls'." with param `messages.[4].role` (smarter-sh/smarter#264), "An
 *   assistant message with 'tool_calls' must be followed by tool messages responding to each
 *   'tool_call_id'." (microsoft/promptflow#3130). JSON mode's refusal of messages without the word "json"
 *   and the one of an unknown tool_call_id are worded as remembered: no source here quotes them.
 *
 * The chat answer echoes the last message (cut before a stop sequence, or at max_tokens with finish_reason
 * length); it never calls a tool. Streamed, it goes in pieces of a word or a run of punctuation each. Not
 * sent: the `obfuscation` padding OpenAI adds to stream events by default (include_obfuscation), whose exact
 * place in the chunk no source here shows; `logprobs` are always null.
 *
 * Opus comes in an Ogg container. Audio and images are real files (ffmpeg, PNG) so that tests can decode them.
 * It counts submissions per X-Client-Request-Id, and misbehaves on demand, one queued behaviour per call
 * (`next(path, behaviour)`); a stream is paced by its behaviour's `pace` or the fake's `streamDelayMs`.
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

/**
 * How a stream goes: milliseconds waited before each event after the first, or a function awaited before
 * event `index` (1, 2, …) is sent (a test's gate: the fake holds the stream until it resolves).
 */
export type Pace = number | ((index: number) => Promise<void> | void);

/** An error as OpenAI sends it inside a stream: `data: {"error": {...}}`. */
export interface StreamError {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

/** What the fake sent of a streamed answer. */
export interface StreamRecord {
  /** Events sent (chunks, an error event, [DONE]). */
  events: number;
  /** Bytes of the body sent. */
  bytes: number;
  /** How it ended: undefined while it goes on; closed-by-client when the client closed it before its end. */
  ended: 'done' | 'error' | 'cut' | 'closed-by-client' | undefined;
}

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
  | { kind: 'echo-key' }
  /** A streamed chat answer, paced (the answer itself as usual). */
  | { kind: 'stream-paced'; pace: Pace }
  /** A streamed chat answer whose first `afterChunks` events go, then an error event (default: a server_error) and [DONE]. */
  | { kind: 'stream-error'; afterChunks: number; error?: StreamError; pace?: Pace }
  /** A streamed chat answer whose connection is destroyed after `afterChunks` events (before [DONE] at the latest). */
  | { kind: 'stream-cut'; afterChunks: number; pace?: Pace }
  /** A streamed chat answer of `pieces` content chunks (27 bytes of text each): a large stream, sent as the client reads it. */
  | { kind: 'stream-long'; pieces: number; pace?: Pace }
  /** These events' data as they are (then nothing more: no [DONE] unless given), after the request was checked. */
  | { kind: 'stream-events'; events: string[]; pace?: Pace };

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
  /** Hanging or streamed answers whose connection the client closed before their end (a cancel, a time-out, a limit). */
  closedEarly(): number;
  /** What was sent of each streamed answer, by X-Client-Request-Id. */
  streams: Map<string, StreamRecord>;
  /** Resolves once the streamed answer to X-Client-Request-Id `clientId` has ended (sent whole, cut, or closed by the client). */
  streamEnded(clientId: string): Promise<NonNullable<StreamRecord['ended']>>;
  next(path: FakePath, behaviour: Behaviour): void;
  close(): Promise<void>;
}

const CHAT_MODELS = ['gpt-4o-mini', 'gpt-4o', 'gpt-4.1-mini', 'o3-mini', 'o4-mini', 'gpt-5-mini'];
const REASONING = /^(o\d|gpt-5)/;
/** "Not supported with latest reasoning models `o3` and `o4-mini`" (openai-node, `stop`). */
const NO_STOP_MODELS = ['o3', 'o4-mini'];
/** The fields of a message, by role (openai-node ChatCompletion{System,Developer,User,Assistant,Tool}MessageParam). */
const MESSAGE_FIELDS: Record<string, string[]> = {
  system: ['role', 'content', 'name'],
  developer: ['role', 'content', 'name'],
  user: ['role', 'content', 'name'],
  assistant: ['role', 'content', 'name', 'refusal', 'audio', 'tool_calls', 'function_call'],
  tool: ['role', 'content', 'tool_call_id'],
};
/** The error OpenAI sends inside a stream that fails after its 200 (as quoted in sashabaranov/go-openai#396). */
const STREAM_SERVER_ERROR: StreamError = {
  message: 'The server experienced an error while processing your request. We apologize for the inconvenience!',
  type: 'server_error',
  param: null,
  code: null,
};
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
  'functions',
  'function_call',
  'web_search_options',
  'prompt_cache_retention',
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

const invalid = (param: string, message: string, code: string | null = 'invalid_value') => new Refusal(400, message, param, code);

/** A text in the pieces a stream sends it in: a word or a run of punctuation each, with the spaces before it. */
export function piecesOf(text: string): string[] {
  return text.match(/\s*(?:[\p{L}\p{N}']+|[^\p{L}\p{N}'\s]+)|\s+/gu) ?? [];
}

export async function startFakeOpenAi(options: { apiKey?: string; organization?: string; streamDelayMs?: number } = {}): Promise<FakeOpenAi> {
  const apiKey = options.apiKey ?? 'sk-fake-0123456789abcdefSECRET';
  const organization = options.organization ?? 'org-fake';
  const received: Received[] = [];
  const submissions = new Map<string, number>();
  const usage = new Map<string, { prompt_tokens: number; completion_tokens: number }>();
  const queued = new Map<FakePath, Behaviour[]>();
  const files = new Map<string, Buffer>();
  const hanging = new Set<http.ServerResponse>();
  const open = new Set<http.ServerResponse>();
  const streams = new Map<string, StreamRecord>();
  const streamWaiters = new Map<string, Array<(ended: NonNullable<StreamRecord['ended']>) => void>>();
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
        case '/chat/completions': {
          const answer = chat(body, behaviour);
          if (!answer.stream) {
            usage.set(clientId, answer.counted);
            return json(res, 200, completionOf(answer));
          }
          if (answer.includeUsage) usage.set(clientId, answer.counted);
          const pace = behaviour && 'pace' in behaviour ? behaviour.pace : undefined;
          switch (behaviour?.kind) {
            case 'stream-error':
              return await sendStream(res, clientId, chunksOf(answer), {
                pace,
                errorAfter: behaviour.afterChunks,
                ...(behaviour.error ? { error: behaviour.error } : {}),
              });
            case 'stream-cut':
              return await sendStream(res, clientId, chunksOf(answer), { pace, cutAfter: behaviour.afterChunks });
            case 'stream-events':
              return await sendStream(res, clientId, behaviour.events, { pace, done: false });
            default:
              return await sendStream(res, clientId, chunksOf(answer), { pace });
          }
        }
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
  const typeName = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value);

  /** A chat request's answer, before it is sent whole (chat.completion) or streamed (chat.completion.chunk). */
  interface ChatAnswer {
    id: string;
    created: number;
    model: string;
    n: number;
    content: string;
    /** The content as the stream sends it: a word or a run of punctuation each, with the spaces before it. */
    pieces: Iterable<string>;
    finish: string;
    counted: { prompt_tokens: number; completion_tokens: number };
    stream: boolean;
    includeUsage: boolean;
  }

  /** Checks a chat request as OpenAI does and makes its answer (an echo of the last message). */
  function chat(body: Record<string, unknown>, behaviour: Behaviour | undefined): ChatAnswer {
    unknownFields(body, CHAT_FIELDS);
    required(body, 'model');
    required(body, 'messages');
    const model = String(body.model);
    if (!CHAT_MODELS.includes(model)) throw modelNotFound(model);
    const { stream, includeUsage } = streamOptionsOf(body);
    const messages = checkedMessages(body.messages);
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
    if (body.top_p !== undefined && body.top_p !== null) {
      if (typeof body.top_p !== 'number')
        throw invalid('top_p', `Invalid type for 'top_p': expected a decimal, but got ${typeName(body.top_p)} instead.`, 'invalid_type');
      if (body.top_p > 1)
        throw invalid(
          'top_p',
          `Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got ${body.top_p} instead.`,
          'decimal_above_max_value',
        );
      if (body.top_p < 0)
        throw invalid(
          'top_p',
          `Invalid 'top_p': decimal below minimum value. Expected a value >= 0, but got ${body.top_p} instead.`,
          'decimal_below_min_value',
        );
    }
    if (REASONING.test(model) && body.max_tokens !== undefined) {
      throw invalid(
        'max_tokens',
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        'unsupported_parameter',
      );
    }
    for (const name of ['max_tokens', 'max_completion_tokens', 'seed', 'n']) {
      if (body[name] !== undefined && !Number.isInteger(body[name]))
        throw invalid(name, `Invalid type for '${name}': expected an integer, but got ${typeof body[name]} instead.`, 'invalid_type');
    }
    const n = (body.n as number | undefined) ?? 1;
    if (n < 1) throw invalid('n', `Invalid 'n': integer below minimum value. Expected a value >= 1, but got ${n} instead.`, 'integer_below_min_value');
    if (n > 128) throw invalid('n', `Invalid 'n': integer above maximum value. Expected a value <= 128, but got ${n} instead.`, 'integer_above_max_value');
    const stops = stopsOf(body, model);
    if (body.user !== undefined && typeof body.user !== 'string')
      throw invalid('user', `Invalid type for 'user': expected a string, but got ${typeName(body.user)} instead.`, 'invalid_type');
    checkResponseFormat(body.response_format, messages);
    checkTools(body);

    const last = messages[messages.length - 1] as { content: unknown };
    let content = `echo: ${typeof last.content === 'string' ? last.content : JSON.stringify(last.content)}`;
    let finish = 'stop';
    // The answer ends before the first stop sequence, which it does not contain.
    const at = Math.min(...stops.map((s) => content.indexOf(s)).filter((i) => i >= 0), content.length);
    content = content.slice(0, at);
    const limit = (body.max_completion_tokens ?? body.max_tokens) as number | undefined;
    if (limit !== undefined && tokens(content) > limit) {
      content = content.slice(0, limit * 4);
      finish = 'length';
    }
    if (behaviour?.kind === 'content-filter') {
      content = '';
      finish = 'content_filter';
    }
    let pieces: Iterable<string> = piecesOf(content);
    if (behaviour?.kind === 'stream-long') {
      const count = behaviour.pieces;
      content = '';
      pieces = (function* () {
        for (let i = 0; i < count; i++) yield ' lorem ipsum dolor sit amet';
      })();
    }
    return {
      id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
      created: Math.floor(Date.now() / 1000),
      model: `${model}-2024-07-18`,
      n,
      content,
      pieces,
      finish,
      counted: {
        prompt_tokens: messages.reduce((sum: number, m) => sum + tokens(String(m.content)) + 4, 0),
        completion_tokens: behaviour?.kind === 'stream-long' ? behaviour.pieces * 7 * n : tokens(content) * n,
      },
      stream,
      includeUsage,
    };
  }

  /** `stream` and `stream_options`: the options only with `stream: true`, as OpenAI refuses them otherwise. */
  function streamOptionsOf(body: Record<string, unknown>): { stream: boolean; includeUsage: boolean } {
    if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean')
      throw invalid('stream', `Invalid type for 'stream': expected a boolean, but got ${typeName(body.stream)} instead.`, 'invalid_type');
    const stream = body.stream === true;
    const options = body.stream_options;
    if (options === undefined || options === null) return { stream, includeUsage: false };
    if (!stream) throw invalid('stream_options', "The 'stream_options' parameter is only allowed when 'stream' is enabled.", null);
    if (typeof options !== 'object' || Array.isArray(options))
      throw invalid('stream_options', `Invalid type for 'stream_options': expected an object, but got ${typeName(options)} instead.`, 'invalid_type');
    for (const [name, value] of Object.entries(options)) {
      if (name !== 'include_usage' && name !== 'include_obfuscation')
        throw invalid(`stream_options.${name}`, `Unknown parameter: 'stream_options.${name}'.`, 'unknown_parameter');
      if (typeof value !== 'boolean')
        throw invalid(
          `stream_options.${name}`,
          `Invalid type for 'stream_options.${name}': expected a boolean, but got ${typeName(value)} instead.`,
          'invalid_type',
        );
    }
    return { stream, includeUsage: (options as { include_usage?: boolean }).include_usage === true };
  }

  /** The messages, each with the fields of its role; a tool's answer follows the assistant message that called it. */
  function checkedMessages(value: unknown): Array<Record<string, unknown>> {
    if (!Array.isArray(value) || value.length === 0)
      throw invalid('messages', "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'empty_array');
    let calling: { index: number; ids: Set<string> } | undefined;
    const unanswered = (c: { index: number; ids: Set<string> }) =>
      invalid(
        `messages.[${c.index}].role`,
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...c.ids].join(', ')}`,
        null,
      );
    for (const [i, m] of value.entries()) {
      const message = (m && typeof m === 'object' ? m : {}) as Record<string, unknown>;
      const role = String(message.role);
      const fields = MESSAGE_FIELDS[role];
      if (!fields)
        throw invalid(
          `messages[${i}].role`,
          `Invalid value: '${String(message.role)}'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.`,
        );
      for (const name of Object.keys(message))
        if (!fields.includes(name)) throw invalid(`messages[${i}].${name}`, `Unknown parameter: 'messages[${i}].${name}'.`, 'unknown_parameter');
      const calls = role === 'assistant' && Array.isArray(message.tool_calls) && message.tool_calls.length > 0 ? message.tool_calls : undefined;
      if (message.content === undefined || message.content === null) {
        if (!calls) throw invalid(`messages[${i}].content`, `Missing required parameter: 'messages[${i}].content'.`, 'missing_required_parameter');
      } else if (typeof message.content !== 'string' && !Array.isArray(message.content))
        throw invalid(
          `messages[${i}].content`,
          `Invalid type for 'messages[${i}].content': expected one of a string or array of objects, but got ${typeof message.content} instead.`,
          'invalid_type',
        );
      if (message.name !== undefined && typeof message.name !== 'string')
        throw invalid(
          `messages[${i}].name`,
          `Invalid type for 'messages[${i}].name': expected a string, but got ${typeName(message.name)} instead.`,
          'invalid_type',
        );
      for (const [j, call] of (calls ?? []).entries()) {
        const c = (call ?? {}) as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } };
        for (const [path, present] of [
          ['id', typeof c.id === 'string'],
          ['type', c.type !== undefined],
          ['function', c.function !== undefined],
          ['function.name', typeof c.function?.name === 'string'],
          ['function.arguments', typeof c.function?.arguments === 'string'],
        ] as const) {
          if (!present)
            throw invalid(
              `messages[${i}].tool_calls[${j}].${path}`,
              `Missing required parameter: 'messages[${i}].tool_calls[${j}].${path}'.`,
              'missing_required_parameter',
            );
        }
        if (c.type !== 'function')
          throw invalid(`messages[${i}].tool_calls[${j}].type`, `Invalid value: '${String(c.type)}'. Supported values are: 'function'.`);
      }
      if (role === 'tool') {
        const id = message.tool_call_id;
        if (typeof id !== 'string')
          throw invalid(`messages[${i}].tool_call_id`, `Missing required parameter: 'messages[${i}].tool_call_id'.`, 'missing_required_parameter');
        if (!calling)
          throw invalid(
            `messages.[${i}].role`,
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
            null,
          );
        if (!calling.ids.delete(id))
          throw invalid(`messages.[${i}].tool_call_id`, `Invalid parameter: 'tool_call_id' of '${id}' not found in 'tool_calls' of previous message.`, null);
        continue;
      }
      if (calling && calling.ids.size > 0) throw unanswered(calling);
      calling = calls ? { index: i, ids: new Set(calls.map((c) => String((c as { id: unknown }).id))) } : undefined;
    }
    if (calling && calling.ids.size > 0) throw unanswered(calling);
    return value as Array<Record<string, unknown>>;
  }

  function stopsOf(body: Record<string, unknown>, model: string): string[] {
    const stop = body.stop;
    if (stop === undefined || stop === null) return [];
    if (NO_STOP_MODELS.includes(model)) throw invalid('stop', "Unsupported parameter: 'stop' is not supported with this model.", 'unsupported_parameter');
    const list = typeof stop === 'string' ? [stop] : stop;
    if (!Array.isArray(list) || !list.every((s) => typeof s === 'string'))
      throw invalid('stop', `Invalid type for 'stop': expected one of a string or array of strings, but got ${typeName(stop)} instead.`, 'invalid_type');
    if (list.length > 4)
      throw invalid(
        'stop',
        `Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length ${list.length} instead.`,
        'array_above_max_length',
      );
    return list.filter((s) => s !== '');
  }

  function checkResponseFormat(format: unknown, messages: Array<Record<string, unknown>>) {
    if (format === undefined || format === null) return;
    if (typeof format !== 'object' || Array.isArray(format))
      throw invalid('response_format', `Invalid type for 'response_format': expected an object, but got ${typeName(format)} instead.`, 'invalid_type');
    const { type, json_schema: schema } = format as { type?: unknown; json_schema?: { name?: unknown } };
    if (type === undefined) throw invalid('response_format.type', "Missing required parameter: 'response_format.type'.", 'missing_required_parameter');
    if (!['text', 'json_object', 'json_schema'].includes(String(type)))
      throw invalid('response_format.type', `Invalid value: '${String(type)}'. Supported values are: 'text', 'json_object', and 'json_schema'.`);
    if (type === 'json_schema' && (!schema || typeof schema !== 'object'))
      throw invalid('response_format.json_schema', "Missing required parameter: 'response_format.json_schema'.", 'missing_required_parameter');
    if (type === 'json_schema' && typeof schema?.name !== 'string')
      throw invalid('response_format.json_schema.name', "Missing required parameter: 'response_format.json_schema.name'.", 'missing_required_parameter');
    if (type === 'json_object' && !messages.some((m) => /json/i.test(typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''))))
      throw invalid('messages', "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.", null);
  }

  function checkTools(body: Record<string, unknown>) {
    const tools = body.tools;
    if (tools !== undefined) {
      if (!Array.isArray(tools))
        throw invalid('tools', `Invalid type for 'tools': expected an array of objects, but got ${typeName(tools)} instead.`, 'invalid_type');
      if (tools.length > 128)
        throw invalid(
          'tools',
          `Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length ${tools.length} instead.`,
          'array_above_max_length',
        );
      for (const [j, t] of tools.entries()) {
        const tool = (t ?? {}) as { type?: unknown; function?: { name?: unknown }; custom?: { name?: unknown } };
        if (tool.type !== 'function' && tool.type !== 'custom')
          throw invalid(`tools[${j}].type`, `Invalid value: '${String(tool.type)}'. Supported values are: 'function' and 'custom'.`);
        const name = tool.type === 'function' ? tool.function?.name : tool.custom?.name;
        if (typeof name !== 'string')
          throw invalid(`tools[${j}].${tool.type}.name`, `Missing required parameter: 'tools[${j}].${tool.type}.name'.`, 'missing_required_parameter');
        if (!/^[a-zA-Z0-9_-]{1,64}$/.test(name))
          throw invalid(
            `tools[${j}].${tool.type}.name`,
            `Invalid 'tools[${j}].${tool.type}.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`,
          );
      }
    }
    for (const name of ['tool_choice', 'parallel_tool_calls']) {
      if (body[name] !== undefined && tools === undefined)
        throw invalid(name, `Invalid value for '${name}': '${name}' is only allowed when 'tools' are specified.`, null);
    }
    const choice = body.tool_choice;
    if (typeof choice === 'string' && !['none', 'auto', 'required'].includes(choice))
      throw invalid('tool_choice', `Invalid value: '${choice}'. Supported values are: 'none', 'auto', and 'required'.`);
    if (choice !== undefined && typeof choice !== 'string') {
      const named = (choice ?? {}) as { type?: unknown; function?: { name?: unknown } };
      if (!['function', 'custom', 'allowed_tools'].includes(String(named.type)))
        throw invalid('tool_choice.type', `Invalid value: '${String(named.type)}'. Supported values are: 'function', 'custom', and 'allowed_tools'.`);
      if (named.type === 'function' && typeof named.function?.name !== 'string')
        throw invalid('tool_choice.function.name', "Missing required parameter: 'tool_choice.function.name'.", 'missing_required_parameter');
    }
  }

  function usageBody(counted: ChatAnswer['counted']) {
    return {
      ...counted,
      total_tokens: counted.prompt_tokens + counted.completion_tokens,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    };
  }

  /** The answer whole, as a chat.completion. */
  function completionOf(a: ChatAnswer) {
    return {
      id: a.id,
      object: 'chat.completion',
      created: a.created,
      model: a.model,
      choices: Array.from({ length: a.n }, (_, index) => ({
        index,
        message: { role: 'assistant', content: a.content, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: a.finish,
      })),
      usage: usageBody(a.counted),
      service_tier: 'default',
      system_fingerprint: 'fp_fake',
    };
  }

  /**
   * The answer streamed, as the data of each event: chat.completion.chunk objects (the same id, created and
   * model in each), per choice a first delta with the role and an empty content, then a delta per piece, then
   * an empty delta with the finish_reason; with `include_usage`, every one of them has `usage: null` and a
   * last chunk has empty choices and the usage. `[DONE]` is the sender's.
   */
  function* chunksOf(a: ChatAnswer): Generator<string> {
    const head = { id: a.id, object: 'chat.completion.chunk', created: a.created, model: a.model, service_tier: 'default', system_fingerprint: 'fp_fake' };
    const chunk = (index: number, delta: Record<string, unknown>, finish: string | null) =>
      JSON.stringify({ ...head, choices: [{ index, delta, logprobs: null, finish_reason: finish }], ...(a.includeUsage ? { usage: null } : {}) });
    for (let index = 0; index < a.n; index++) yield chunk(index, { role: 'assistant', content: '' }, null);
    for (const piece of a.pieces) for (let index = 0; index < a.n; index++) yield chunk(index, { content: piece }, null);
    for (let index = 0; index < a.n; index++) yield chunk(index, {}, a.finish);
    if (a.includeUsage) yield JSON.stringify({ ...head, choices: [], usage: usageBody(a.counted) });
  }

  /**
   * Sends `events` as server-sent events (`data: …` and a blank line each), then `data: [DONE]`, paced:
   * before each event after the first, `pace` is waited (milliseconds, or a function of the event's index).
   * `cutAfter`: the connection is destroyed once that many events went (before [DONE] at the latest);
   * `errorAfter`: an error event follows that many events, then [DONE], as OpenAI reports a failure mid-stream.
   */
  async function sendStream(
    res: http.ServerResponse,
    clientId: string,
    events: Iterable<string>,
    how: { pace?: Pace; cutAfter?: number; errorAfter?: number; error?: StreamError; done?: boolean },
  ) {
    const record: StreamRecord = { events: 0, bytes: 0, ended: undefined };
    streams.set(clientId, record);
    open.add(res);
    const end = (how: NonNullable<StreamRecord['ended']>) => {
      record.ended = how;
      for (const resolve of streamWaiters.get(clientId) ?? []) resolve(how);
      streamWaiters.delete(clientId);
    };
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, must-revalidate',
      'x-request-id': `req_${Math.random().toString(16).slice(2)}`,
      'openai-processing-ms': '12',
    });
    res.flushHeaders();
    res.on('error', () => undefined);
    res.on('close', () => {
      open.delete(res);
      if (record.ended === undefined) {
        closedEarly++;
        end('closed-by-client');
      }
    });
    let flushed = Promise.resolve();
    const send = async (data: string) => {
      const text = `data: ${data}\n\n`;
      record.bytes += Buffer.byteLength(text);
      flushed = new Promise<void>((resolve) => res.write(text, () => resolve()));
      if (res.writableNeedDrain)
        await new Promise<void>((resolve) => {
          res.once('drain', resolve);
          res.once('close', resolve);
        });
    };
    const pace = how.pace ?? options.streamDelayMs ?? 0;
    const cut = Symbol('cut');
    // Every event in order, the error event, [DONE] and the break included: each is paced alike.
    const all = function* (): Generator<string | typeof cut> {
      let sent = 0;
      for (const event of events) {
        if (sent === how.cutAfter) return yield cut;
        if (sent === how.errorAfter) break;
        yield event;
        sent++;
      }
      if (how.cutAfter !== undefined) return yield cut;
      if (how.errorAfter !== undefined) yield JSON.stringify({ error: how.error ?? STREAM_SERVER_ERROR });
      if (how.done !== false) yield '[DONE]';
    };
    for (const next of all()) {
      if (record.events > 0) await paced(pace, record.events);
      if (record.ended !== undefined) return;
      if (next === cut) {
        end('cut');
        // What was written goes out first: a destroyed socket drops what it still holds.
        await flushed;
        res.destroy();
        return;
      }
      await send(next);
      record.events++;
    }
    if (record.ended !== undefined) return;
    end(how.errorAfter !== undefined ? 'error' : 'done');
    res.end();
  }

  async function paced(pace: Pace, index: number) {
    if (typeof pace === 'function') await pace(index);
    else if (pace > 0) await new Promise((resolve) => setTimeout(resolve, pace));
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
        if (body?.stream === true)
          res
            .writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' })
            .end('data: {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [\n\n');
        else res.writeHead(200, { 'content-type': 'application/json' }).end('{"id": "chatcmpl-1", "object": "chat.completion", "choices": [');
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
    streams,
    streamEnded(clientId) {
      const ended = streams.get(clientId)?.ended;
      if (ended) return Promise.resolve(ended);
      return new Promise((resolve) => streamWaiters.set(clientId, [...(streamWaiters.get(clientId) ?? []), resolve]));
    },
    next(path, behaviour) {
      const list = queued.get(path) ?? [];
      list.push(behaviour);
      queued.set(path, list);
    },
    async close() {
      for (const res of [...hanging, ...open]) res.destroy();
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

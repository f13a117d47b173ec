/**
 * A strict fake of a Cog container's HTTP API, as served by coglet (the Rust server of cog 0.17 and later),
 * for the Cog adapter's tests. Built from:
 * - https://github.com/replicate/cog/blob/main/docs/http.md (endpoints, Prefer: respond-async, webhooks and
 *   their filter, 409 when every slot is busy, data URL outputs, cancel 200/404, GET /health-check);
 * - crates/coglet/src/transport/http/routes.rs (the routes and their exact answers: 202 {id, status:
 *   "starting"}, a PUT of an id in flight answered 202 with its state before any capacity check, 409
 *   {"error":"At capacity - all prediction slots busy","status":"failed"}, 503 while setup runs, 422
 *   `detail` for an id that differs from the URL's and for missing required inputs, 406 for event streams
 *   of a model that does not stream, 100 MiB body limit);
 * - crates/coglet/src/service.rs (a prediction is removed once it ends, so a later PUT of its id runs it
 *   again; cancel answers 200 {} for a prediction in flight, 404 {} otherwise);
 * - crates/coglet/src/prediction.rs (the state snapshot {id, status, logs, output?, error?, metrics} and
 *   the statuses starting, processing, succeeded, failed, canceled; the start webhook says processing);
 * - crates/coglet/src/webhook.rs (webhooks are POSTs of the snapshot as JSON with User-Agent coglet/<v> and,
 *   when WEBHOOK_AUTH_TOKEN is set, Authorization: Bearer <token>; only the terminal one is retried, on
 *   429/500/502/503/504 and network errors: WebhookConfig's max_retries 12 and backoff_base 100 ms, the n-th
 *   retry after 100 ms × 2^min(n, 10), so 0.2 s, 0.4 s … 102.4 s, 102.4 s, 102.4 s: 409.4 s of waits. The
 *   knob `webhookRetryScale` shrinks those waits for a test, in the same proportions);
 * - crates/coglet/src/supervisor.rs (update_status removes an ended prediction before its end is posted, so a
 *   PUT of its id while that end is still being retried already starts a new run);
 * - crates/coglet-python/src/output.rs (file outputs as data:<mime>;base64,<data>);
 * - axum 0.8's Json extractor (415 for a content type that is not JSON, 400 for a body that is not JSON,
 *   422 for JSON of the wrong shape, all as text/plain; no content type means no body).
 *
 * It counts runs (predictions started), PUTs and cancels per prediction id, and misbehaves on request:
 * canned answers in front of the next PUTs (a proxy's 429 with Retry-After, a 500, malformed JSON, a hang),
 * webhooks lost, repeated or sent out of order. Files at /uploads/<name> stand for the external store of
 * --upload-url (not Cog itself): deleting one makes its URL answer 404, as an expired one would.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { request } from 'undici';
import type { InboundEvent, ProviderAdapter, VerifiedEvent } from '../../providers/adapter.ts';

export const COGLET_VERSION = '0.17.0';
/** webhook.rs WebhookConfig::default(): max_retries. */
export const COG_WEBHOOK_MAX_RETRIES = 12;
/** The wait before the n-th retry of an end webhook (webhook.rs: backoff_base × 2^min(n, 10), backoff_base 100 ms). */
export function cogWebhookBackoffMs(retry: number): number {
  return 100 * 2 ** Math.min(retry, 10);
}
const MAX_BODY_BYTES = 100 * 1024 * 1024;
const EVENTS = ['start', 'output', 'logs', 'completed'] as const;
type WebhookEvent = (typeof EVENTS)[number];
type Status = 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled';

/** What the container's model does with one prediction. */
export interface ModelRun {
  output?: unknown;
  /** The model raised: the prediction fails with this message. */
  error?: string;
  logs?: string;
  /** Time from processing to the end; default 20 ms. */
  durationMs?: number;
  /** Stays processing until the test calls `finish(id, ...)`. */
  hold?: boolean;
}

export type CannedAnswer = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

export interface CogFakeKnobs {
  /** false: setup still runs (creates answer 503, /health-check says STARTING). */
  ready: boolean;
  /** Prediction slots (`@cog.concurrent(max=N)`); 1 by default, as Cog. */
  slots: number;
  model: (input: Record<string, unknown>, id: string) => ModelRun;
  /** Inputs of type Path or File: a value must be a data: or http(s) URL, or the prediction fails. */
  fileInputs: string[];
  /** Inputs the model's schema requires (422 when missing). */
  requiredInputs: string[];
  /** Answers given instead of Cog's to the next PUTs, one each, in order. */
  putAnswers: CannedAnswer[];
  /** deliver: as Cog; drop: none arrive; duplicate: each twice; completedFirst: the start webhook after the end. */
  webhooks: 'deliver' | 'drop' | 'duplicate' | 'completedFirst';
  /** Webhooks lost on the way (the receiver never sees them); `run` counts the id's runs from 1. */
  loseWebhook?: (webhook: { id: string; status: string; run: number }) => boolean;
  /** The container's WEBHOOK_AUTH_TOKEN. */
  webhookAuthToken?: string;
  /** Cog's retry waits of an end webhook times this (1: Cog's own 0.2 s … 102.4 s); the schedule's shape is Cog's. */
  webhookRetryScale: number;
}

interface Prediction {
  id: string;
  input: Record<string, unknown>;
  status: Status;
  logs: string;
  output?: unknown;
  error?: string;
  startedAt: number;
  webhook?: string;
  filter: Set<WebhookEvent>;
  heldStart?: Record<string, unknown>;
  run: number;
  /** finish() called before the model began: it ends as soon as it does. */
  finishWith?: { output?: unknown; error?: string };
  ended: Promise<void>;
  end: () => void;
  timer?: NodeJS.Timeout;
}

export interface CogFake {
  url: string;
  knobs: CogFakeKnobs;
  /** Predictions started per id (a PUT joined to a run in flight starts none). */
  runs: Map<string, number>;
  puts: Map<string, number>;
  cancels: Map<string, number>;
  /** Every request: method, path, lower-cased headers. */
  requests: Array<{ method: string; path: string; headers: Record<string, string | undefined> }>;
  /** The input each run got (its data URLs decoded into `files`). */
  inputs: Map<string, { input: Record<string, unknown>; files: Record<string, { contentType: string; bytes: Buffer }> }>;
  /** Webhooks posted: the prediction id, its status and what the receiver answered (0: no answer). */
  webhooksSent: Array<{ id: string; status: string; answer: number }>;
  /** Files served at /uploads/<name>. */
  uploads: Map<string, Buffer>;
  inFlight(id: string): boolean;
  /** Ends a held prediction. */
  finish(id: string, result: { output?: unknown; error?: string }): void;
  /** Resolves once the prediction `id` has ended and its terminal webhook was answered (or given up). */
  settled(id: string): Promise<void>;
  close(): Promise<void>;
}

export function dataUrl(contentType: string, bytes: Buffer): string {
  return `data:${contentType};base64,${bytes.toString('base64')}`;
}

export async function startCogFake(knobs: Partial<CogFakeKnobs> = {}): Promise<CogFake> {
  const settings: CogFakeKnobs = {
    ready: true,
    slots: 1,
    model: () => ({ output: 'ok' }),
    fileInputs: [],
    requiredInputs: [],
    putAnswers: [],
    webhooks: 'deliver',
    webhookRetryScale: 1,
    ...knobs,
  };
  const predictions = new Map<string, Prediction>();
  const settling = new Map<string, Promise<void>>();
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  const fake: CogFake = {
    url: '',
    knobs: settings,
    runs: new Map(),
    puts: new Map(),
    cancels: new Map(),
    requests: [],
    inputs: new Map(),
    webhooksSent: [],
    uploads: new Map(),
    inFlight: (id) => predictions.has(id),
    finish: (id, result) => {
      const prediction = predictions.get(id);
      if (prediction?.status === 'processing') end(prediction, result.error !== undefined ? 'failed' : 'succeeded', result);
      else if (prediction?.status === 'starting') prediction.finishWith = result;
    },
    settled: async (id) => {
      while (predictions.has(id) || !settling.has(id)) await pause(5);
      await settling.get(id);
    },
    close: async () => {
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      for (const prediction of predictions.values()) if (prediction.timer) clearTimeout(prediction.timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const later = (ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      if (!closed) fn();
    }, ms);
    timers.add(timer);
    return timer;
  };
  const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  const bump = (map: Map<string, number>, id: string) => map.set(id, (map.get(id) ?? 0) + 1);

  function snapshot(prediction: Prediction): Record<string, unknown> {
    const body: Record<string, unknown> = { id: prediction.id, status: prediction.status, logs: prediction.logs };
    if (prediction.output !== undefined) body.output = prediction.output;
    if (prediction.error !== undefined) body.error = prediction.error;
    const terminal = prediction.status !== 'starting' && prediction.status !== 'processing';
    body.metrics = terminal ? { predict_time: (Date.now() - prediction.startedAt) / 1000 } : {};
    return body;
  }

  async function post(prediction: Prediction, body: Record<string, unknown>, terminal: boolean): Promise<void> {
    if (!prediction.webhook || closed) return;
    if (settings.loseWebhook?.({ id: prediction.id, status: String(body.status), run: prediction.run })) return;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': `coglet/${COGLET_VERSION}` };
    if (settings.webhookAuthToken) headers.authorization = `Bearer ${settings.webhookAuthToken}`;
    // webhook.rs send_terminal: `attempt` counts the failures; past max_retries (12) it gives up.
    let attempt = 0;
    for (;;) {
      let answer = 0;
      try {
        // Cog's client gives each try 30 s.
        const response = await request(prediction.webhook, {
          method: 'POST',
          headers,
          body: JSON.stringify(body),
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        });
        await response.body.dump();
        answer = response.statusCode;
      } catch {
        answer = 0;
      }
      fake.webhooksSent.push({ id: prediction.id, status: String(body.status), answer });
      const retry = answer === 0 || [429, 500, 502, 503, 504].includes(answer);
      if (!terminal || !retry || closed) return;
      attempt++;
      if (attempt > COG_WEBHOOK_MAX_RETRIES) return;
      // A timer of the fake's own: closing the fake drops the retries still waiting.
      await new Promise<void>((resolve) => later(cogWebhookBackoffMs(attempt) * settings.webhookRetryScale, resolve));
    }
  }

  async function sendWebhook(prediction: Prediction, event: WebhookEvent): Promise<void> {
    if (!prediction.filter.has(event) || settings.webhooks === 'drop') return;
    const body = snapshot(prediction);
    if (event === 'start' && settings.webhooks === 'completedFirst') {
      prediction.heldStart = body;
      return;
    }
    await post(prediction, body, event === 'completed');
    if (settings.webhooks === 'duplicate') await post(prediction, body, event === 'completed');
    if (event === 'completed' && prediction.heldStart) await post(prediction, prediction.heldStart, false);
  }

  function end(prediction: Prediction, status: 'succeeded' | 'failed' | 'canceled', result: { output?: unknown; error?: string }): void {
    if (prediction.timer) clearTimeout(prediction.timer);
    prediction.status = status;
    if (status === 'succeeded') prediction.output = result.output;
    if (status === 'failed') prediction.error = result.error;
    settling.set(prediction.id, sendWebhook(prediction, 'completed'));
    // Coglet forgets the prediction once it ended (service.remove_prediction).
    predictions.delete(prediction.id);
    prediction.end();
  }

  function startRun(id: string, input: Record<string, unknown>, webhook: string | undefined, filter: Set<WebhookEvent>): Prediction {
    let resolveEnd = () => {};
    const ended = new Promise<void>((resolve) => {
      resolveEnd = resolve;
    });
    bump(fake.runs, id);
    const prediction: Prediction = {
      id,
      input,
      status: 'starting',
      logs: '',
      startedAt: Date.now(),
      filter,
      ended,
      end: resolveEnd,
      run: fake.runs.get(id)!,
      ...(webhook ? { webhook } : {}),
    };
    predictions.set(id, prediction);
    settling.delete(id);
    later(5, () => {
      if (prediction.status !== 'starting') return;
      prediction.status = 'processing';
      void sendWebhook(prediction, 'start');
      const files: Record<string, { contentType: string; bytes: Buffer }> = {};
      for (const name of settings.fileInputs) {
        if (!(name in input)) continue;
        const values = Array.isArray(input[name]) ? (input[name] as unknown[]) : [input[name]];
        for (const [index, value] of values.entries()) {
          const match = typeof value === 'string' ? /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s.exec(value) : null;
          if (!match && !(typeof value === 'string' && /^https?:\/\//.test(value))) {
            end(prediction, 'failed', { error: `${name}: could not read file input: unsupported value ${JSON.stringify(value).slice(0, 40)}` });
            return;
          }
          if (match) files[values.length > 1 ? `${name}[${index}]` : name] = { contentType: match[1]!, bytes: Buffer.from(match[2]!, 'base64') };
        }
      }
      fake.inputs.set(id, { input, files });
      let run: ModelRun;
      try {
        run = settings.model(input, id);
      } catch (error) {
        end(prediction, 'failed', { error: (error as Error).message });
        return;
      }
      if (run.logs) {
        prediction.logs = run.logs;
        void sendWebhook(prediction, 'logs');
      }
      if (run.hold && prediction.finishWith) run = { ...prediction.finishWith };
      else if (run.hold) return;
      prediction.timer = later(run.durationMs ?? 20, () => {
        if (prediction.status !== 'processing') return;
        end(prediction, run.error !== undefined ? 'failed' : 'succeeded', run);
      });
    });
    return prediction;
  }

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) text(res, 500, `fake error: ${(error as Error).message}`);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const method = req.method ?? 'GET';
    const path = url.pathname;
    fake.requests.push({ method, path, headers: { ...req.headers } as Record<string, string | undefined> });

    const route = routeOf(path);
    if (!route) return void empty(res, 404);
    if (!route.methods.includes(method)) return void empty(res, 405, { allow: route.methods.join(',') });

    if (route.name === 'root') {
      return json(res, 200, {
        cog_version: COGLET_VERSION,
        docs_url: '/docs',
        openapi_url: '/openapi.json',
        shutdown_url: '/shutdown',
        healthcheck_url: '/health-check',
        predictions_url: '/predictions',
        predictions_idempotent_url: '/predictions/{prediction_id}',
        predictions_cancel_url: '/predictions/{prediction_id}/cancel',
      });
    }
    if (route.name === 'health') {
      const status = !settings.ready ? 'STARTING' : predictions.size >= settings.slots ? 'BUSY' : 'READY';
      return json(res, 200, { status, version: { coglet: COGLET_VERSION } });
    }
    if (route.name === 'openapi') {
      const properties = Object.fromEntries(
        [...settings.requiredInputs, ...settings.fileInputs].map((name) => [name, settings.fileInputs.includes(name) ? { type: 'string', format: 'uri' } : {}]),
      );
      return json(res, 200, {
        openapi: '3.0.2',
        info: { title: 'Cog', version: '0.1.0' },
        components: { schemas: { Input: { type: 'object', title: 'Input', required: settings.requiredInputs, properties } } },
      });
    }
    if (route.name === 'shutdown') {
      await drain(req);
      return json(res, 200, {});
    }
    if (route.name === 'upload') {
      const file = fake.uploads.get(decodeURIComponent(route.id));
      if (!file) return void empty(res, 404);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.length });
      return void res.end(file);
    }
    if (route.name === 'cancel') {
      bump(fake.cancels, route.id);
      await drain(req);
      const prediction = predictions.get(route.id);
      if (!prediction) return json(res, 404, {});
      end(prediction, 'canceled', {});
      return json(res, 200, {});
    }

    // Creates: POST /predictions and PUT /predictions/{id}.
    if (route.name === 'put') {
      bump(fake.puts, route.id);
      const canned = settings.putAnswers.shift();
      if (canned === 'hang') return;
      if (canned) {
        await drain(req);
        res.writeHead(canned.status, { 'content-type': 'application/json', ...canned.headers });
        return void res.end(canned.body ?? '');
      }
    }
    const body = await readBody(req);
    if (body === 'too large') return text(res, 413, 'Failed to buffer the request body: length limit exceeded');
    const parsed = parseRequest(req.headers['content-type'], body);
    if ('reject' in parsed) return text(res, parsed.reject.status, parsed.reject.message);
    const request = parsed.request;
    const id = route.name === 'put' ? route.id : (request.id ?? `pred_${process.hrtime.bigint().toString(16)}`);
    if (route.name === 'put' && request.id !== undefined && request.id !== id) {
      return json(res, 422, { detail: [{ loc: ['body', 'id'], msg: 'prediction ID must match the ID supplied in the URL', type: 'value_error' }] });
    }
    const wantsStream = (req.headers.accept ?? '').split(',').some((part) => part.trim().split(';')[0] === 'text/event-stream');
    const running = predictions.get(id);
    if (route.name === 'put' && running) {
      if (wantsStream) return json(res, 406, { error: 'This model does not support streaming responses. Add @cog.streaming to predict() to enable SSE.' });
      return json(res, 202, { ...snapshot(running), input: running.input });
    }
    if (wantsStream) return json(res, 406, { error: 'This model does not support streaming responses. Add @cog.streaming to predict() to enable SSE.' });
    const missing = settings.requiredInputs.filter((name) => !(name in request.input));
    if (missing.length > 0) {
      return json(res, 422, { detail: missing.map((name) => ({ loc: ['body', 'input', name], msg: 'Field required', type: 'value_error.missing' })) });
    }
    if (!settings.ready) {
      return json(res, 503, { error: 'Setup has not finished yet. Wait until it has finished, or GET /health-check for status.', status: 'failed' });
    }
    if (predictions.size >= settings.slots) return json(res, 409, { error: 'At capacity - all prediction slots busy', status: 'failed' });

    const prediction = startRun(id, request.input, request.webhook, request.filter);
    if (req.headers.prefer === 'respond-async') return json(res, 202, { id, status: 'starting' });
    await prediction.ended;
    const result = snapshot(prediction);
    return json(res, 200, result);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

type Route = { name: 'root' | 'health' | 'openapi' | 'shutdown' | 'create' | 'put' | 'cancel' | 'upload'; id: string; methods: string[] };

function routeOf(path: string): Route | undefined {
  if (path === '/') return { name: 'root', id: '', methods: ['GET'] };
  if (path === '/health-check') return { name: 'health', id: '', methods: ['GET'] };
  if (path === '/openapi.json') return { name: 'openapi', id: '', methods: ['GET'] };
  if (path === '/shutdown') return { name: 'shutdown', id: '', methods: ['POST'] };
  if (path === '/predictions') return { name: 'create', id: '', methods: ['POST'] };
  let match = /^\/predictions\/([^/]+)$/.exec(path);
  if (match) return { name: 'put', id: decodeURIComponent(match[1]!), methods: ['PUT'] };
  match = /^\/predictions\/([^/]+)\/cancel$/.exec(path);
  if (match) return { name: 'cancel', id: decodeURIComponent(match[1]!), methods: ['POST'] };
  match = /^\/uploads\/([^/]+)$/.exec(path);
  if (match) return { name: 'upload', id: match[1]!, methods: ['GET'] };
  return undefined;
}

interface CreateRequest {
  id?: string;
  input: Record<string, unknown>;
  webhook?: string;
  filter: Set<WebhookEvent>;
}

/** The PredictionRequest as serde reads it (unknown fields ignored; `input: null` is `{}`). */
function parseRequest(contentType: string | undefined, body: Buffer): { request: CreateRequest } | { reject: { status: number; message: string } } {
  const all = new Set<WebhookEvent>(EVENTS);
  if (contentType === undefined) return { request: { input: {}, filter: all } };
  const mime = contentType.split(';')[0]!.trim().toLowerCase();
  if (mime !== 'application/json' && !/^application\/[^/]+\+json$/.test(mime)) {
    return { reject: { status: 415, message: 'Expected request with `Content-Type: application/json`' } };
  }
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (error) {
    return { reject: { status: 400, message: `Failed to parse the request body as JSON: ${(error as Error).message}` } };
  }
  const wrong = (what: string) => ({ reject: { status: 422, message: `Failed to deserialize the JSON body into the target type: ${what}` } });
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return wrong('invalid type: expected struct PredictionRequest');
  const raw = value as Record<string, unknown>;
  if (raw.id !== undefined && raw.id !== null && typeof raw.id !== 'string') return wrong('id: invalid type, expected a string');
  if (raw.webhook !== undefined && raw.webhook !== null && typeof raw.webhook !== 'string') return wrong('webhook: invalid type, expected a string');
  let filter = all;
  if (raw.webhook_events_filter !== undefined) {
    if (!Array.isArray(raw.webhook_events_filter)) return wrong('webhook_events_filter: invalid type, expected a sequence');
    for (const event of raw.webhook_events_filter) {
      if (!EVENTS.includes(event as WebhookEvent))
        return wrong(`webhook_events_filter: unknown variant \`${String(event)}\`, expected one of \`start\`, \`output\`, \`logs\`, \`completed\``);
    }
    filter = new Set(raw.webhook_events_filter as WebhookEvent[]);
  }
  const input = raw.input === undefined || raw.input === null ? {} : raw.input;
  // The model's Input schema is an object: anything else fails its validation.
  if (typeof input !== 'object' || Array.isArray(input)) return wrong('input: invalid type, expected an object');
  return {
    request: {
      ...(typeof raw.id === 'string' ? { id: raw.id } : {}),
      input: input as Record<string, unknown>,
      ...(typeof raw.webhook === 'string' ? { webhook: raw.webhook } : {}),
      filter,
    },
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer | 'too large'> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return 'too large';
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

async function drain(req: IncomingMessage): Promise<void> {
  for await (const _ of req) {
    /* discard */
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function empty(res: ServerResponse, status: number, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-length': 0, ...headers });
  res.end();
}

/**
 * The service's event route, as the integrator wires it: verifyEvent on the raw request, 401 when refused,
 * one delivery per event id, then deliverEvent on the adapter following the job.
 */
export interface EventsRoute {
  url: string;
  /** The adapter that verifies and receives events (replaced when a job is resumed elsewhere). */
  adapter: ProviderAdapter | undefined;
  accepted: Array<{ providerJobId: string; eventId: string }>;
  refused: string[];
  duplicates: number;
  /** Answers the route gives instead of handling, one per request (e.g. 503 to make Cog retry). */
  answers: number[];
  verify(event: InboundEvent): VerifiedEvent;
  close(): Promise<void>;
}

export async function startEventsRoute(): Promise<EventsRoute> {
  const seen = new Set<string>();
  const sockets = new Set<Socket>();
  const route: EventsRoute = {
    url: '',
    adapter: undefined,
    accepted: [],
    refused: [],
    duplicates: 0,
    answers: [],
    verify: (event) => route.adapter?.verifyEvent?.(event) ?? { ok: false, message: 'no adapter' },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const canned = route.answers.shift();
      if (canned) return empty(res, canned);
      const url = new URL(req.url ?? '/', 'http://route');
      const headers: Record<string, string | undefined> = {};
      for (const [name, value] of Object.entries(req.headers)) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
      const verified = route.verify({ headers, body: Buffer.concat(chunks), query: Object.fromEntries(url.searchParams), now: Date.now() });
      if (!verified.ok) {
        route.refused.push(verified.message);
        return empty(res, 401);
      }
      if (seen.has(verified.eventId)) {
        route.duplicates++;
        return empty(res, 200);
      }
      seen.add(verified.eventId);
      route.accepted.push({ providerJobId: verified.providerJobId, eventId: verified.eventId });
      route.adapter?.deliverEvent?.(verified.providerJobId, verified.payload);
      empty(res, 200);
    })();
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  route.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/providers/cog-test/events`;
  return route;
}

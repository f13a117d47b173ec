/**
 * A strict fake of Replicate's HTTP API, for the adapter's tests. Built from:
 * - https://replicate.com/docs/reference/http (predictions.create, models.predictions.create,
 *   deployments.predictions.create, predictions.get, predictions.cancel), as generated into
 *   replicate/replicate-python-beta src/replicate/resources/{predictions,models/predictions,deployments/predictions}.py
 *   and src/replicate/types/{prediction,prediction_create_params}.py (body fields, the Cancel-After and
 *   Prefer headers, the prediction object, webhook_events_filter's values);
 * - https://replicate.com/docs/topics/predictions/lifecycle and
 *   https://replicate.com/changelog/2025-10-16-prediction-deadlines (statuses starting → processing →
 *   succeeded / failed / canceled / aborted; Cancel-After durations such as `1m`, `5m`);
 * - https://replicate.com/docs/topics/webhooks (Standard Webhooks signing: webhook-id, webhook-timestamp,
 *   webhook-signature, `whsec_` secrets), signed here with the `standardwebhooks` package;
 * - replicate-javascript 1.4.0 index.js, lib/predictions.js, lib/deployments.js and index.test.ts
 *   (`Authorization: Bearer`, JSON bodies, problem-JSON errors `{title, detail, status}`, 201 on create);
 * - replicate/replicate-python issue #47 (401 `Unauthenticated` without a token, 422 `Invalid version or
 *   not permitted` for an unknown version).
 * Where the sources are silent the fake chooses the stricter answer and says so: a body that is not
 * JSON or not `application/json` is refused (400 / 415), a wrong method answers 405, an unknown path 404,
 * and cancelling a finished prediction answers 200 with the prediction unchanged.
 *
 * Predictions advance one step per GET (deterministic, no clock): `startingPolls` GETs in `starting`,
 * then `processingPolls` in `processing` (one log line added per GET), then the scenario's end. With
 * `advance: 'manual'` only `advance(id)` moves them (event tests). Output files are served by the same
 * server under /files/; a file that is not there answers 404 (an expired output URL).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { PNG } from 'pngjs';
import type { AdapterContext, AdapterJob } from '../../providers/adapter.ts';
import { createReplicateAdapter } from '../../providers/replicate/adapter.ts';
import type { ReplicateDeploymentTarget } from '../../providers/replicate/deployment.ts';
import type { ReplicateSettings } from '../../providers/replicate/settings.ts';
import { guardedFetcher } from '../../runtime/egress.ts';

export type PredictionStatus = 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'aborted';

export interface Scenario {
  startingPolls?: number;
  processingPolls?: number;
  /** Log lines, one added per GET while processing (the rest at the end). */
  logs?: string[];
  end: { status: 'succeeded'; output: unknown; metrics?: Record<string, unknown> } | { status: 'failed'; error: string } | { status: 'canceled' | 'aborted' };
  advance?: 'poll' | 'manual';
}

/** A one-shot misbehaviour of the next request of a kind. */
export type Misbehaviour = { status: number; retryAfter?: string; body?: string } | { hang: true } | { malformed: true };

type RequestKind = 'create' | 'get' | 'cancel';

export interface RecordedCreate {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
  predictionId: string;
}

interface Stored {
  scenario: Scenario;
  polls: number;
  step: 'starting' | 'processing' | 'ended';
  logLines: number;
  json: Record<string, unknown>;
}

export interface ReplicateFake {
  /** The API's base URL, http://127.0.0.1:port/v1. */
  baseUrl: string;
  origin: string;
  /** Sets what a model (`model:owner/name`), version (`version:<id>`) or deployment (`deployment:owner/name`) does. */
  scenario(ref: string, scenario: Scenario): void;
  /** Serves bytes at /files/<name>; returns the URL. */
  file(name: string, bytes: Buffer): string;
  removeFile(name: string): void;
  misbehave(kind: RequestKind, ...behaviours: Misbehaviour[]): void;
  /** Drops every misbehaviour still queued. */
  calm(): void;
  /** Every accepted create, in order. */
  creates: RecordedCreate[];
  /** Creates accepted for a job, keyed by its input's `prompt`. */
  submissions(prompt: string): number;
  /** Requests per kind (GETs of predictions, cancels, creates, refused ones included). */
  counts: Record<RequestKind | 'refused', number>;
  prediction(id: string): Record<string, unknown> | undefined;
  /** Moves a prediction one step on (manual scenarios). */
  advance(id: string): Record<string, unknown>;
  /** A webhook delivery of the prediction as it is now, signed as Replicate signs it. */
  webhook(id: string, options?: { msgId?: string; at?: Date; secret?: string }): { headers: Record<string, string>; body: Buffer };
  close(): Promise<void>;
}

const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'aborted']);
const EVENTS = new Set(['start', 'output', 'logs', 'completed']);
const OWNER_NAME = '([A-Za-z0-9][A-Za-z0-9_.-]*)/([A-Za-z0-9][A-Za-z0-9_.-]*)';
// Go-style durations, as Replicate's Cancel-After examples (`1m`, `5m`) are written.
const DURATION = /^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?$/;

export async function startReplicateFake(options: { token: string; webhookSecret?: string }): Promise<ReplicateFake> {
  const scenarios = new Map<string, Scenario>();
  const files = new Map<string, Buffer>();
  const predictions = new Map<string, Stored>();
  const queue: Record<RequestKind, Misbehaviour[]> = { create: [], get: [], cancel: [] };
  const creates: RecordedCreate[] = [];
  const counts = { create: 0, get: 0, cancel: 0, refused: 0 };
  const hanging = new Set<ServerResponse>();
  let origin = '';

  const problem = (res: ServerResponse, status: number, title: string, detail: string, headers: Record<string, string> = {}) => {
    counts.refused += 1;
    res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
    res.end(JSON.stringify({ title, detail, status }));
  };
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  /** Plays a queued misbehaviour; true when it answered. */
  function misbehaved(kind: RequestKind, res: ServerResponse): boolean {
    const next = queue[kind].shift();
    if (!next) return false;
    if ('hang' in next) {
      hanging.add(res);
      return true;
    }
    if ('malformed' in next) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"id": "oops", "status": ');
      return true;
    }
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (next.retryAfter !== undefined) headers['retry-after'] = next.retryAfter;
    res.writeHead(next.status, headers);
    res.end(next.body ?? JSON.stringify({ detail: next.status === 429 ? 'Request was throttled.' : 'Internal server error', status: next.status }));
    return true;
  }

  function step(stored: Stored): void {
    const { scenario, json: p } = stored;
    const logs = scenario.logs ?? [];
    if (stored.step === 'starting') {
      if (stored.polls >= (scenario.startingPolls ?? 1)) {
        stored.step = 'processing';
        stored.polls = 0;
        p.status = 'processing';
        p.started_at = new Date().toISOString();
      }
      return;
    }
    if (stored.step === 'processing') {
      if (stored.logLines < logs.length) {
        stored.logLines += 1;
        p.logs = logs.slice(0, stored.logLines).join('\n');
      }
      if (stored.polls >= (scenario.processingPolls ?? 1)) finishWith(stored);
    }
  }

  function finishWith(stored: Stored): void {
    const { scenario, json: p } = stored;
    stored.step = 'ended';
    p.logs = (scenario.logs ?? []).join('\n');
    p.status = scenario.end.status;
    p.completed_at = new Date().toISOString();
    if (scenario.end.status === 'succeeded') {
      p.output = scenario.end.output;
      p.metrics = { predict_time: 0.5, total_time: 0.6, ...(scenario.end.metrics ?? {}) };
    } else if (scenario.end.status === 'failed') {
      p.error = scenario.end.error;
    }
  }

  async function readBody(req: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  async function create(req: IncomingMessage, res: ServerResponse, path: string, ref: string, versionRequired: boolean): Promise<void> {
    counts.create += 1;
    if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
      return problem(res, 415, 'Unsupported media type', 'The request body must be JSON (Content-Type: application/json).');
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse((await readBody(req)).toString('utf8')) as Record<string, unknown>;
    } catch {
      return problem(res, 400, 'Invalid JSON', 'The request body is not valid JSON.');
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      return problem(res, 400, 'Invalid request', 'The request body must be a JSON object.');
    if (misbehaved('create', res)) return;
    if (typeof body.input !== 'object' || body.input === null || Array.isArray(body.input)) {
      return problem(res, 422, 'Input validation failed', 'input is required and must be an object.');
    }
    if (versionRequired) {
      if (typeof body.version !== 'string') return problem(res, 422, 'Input validation failed', 'version is required.');
      ref = `version:${body.version}`;
    } else if (body.version !== undefined) {
      return problem(res, 422, 'Input validation failed', 'version is not accepted here; the model or deployment in the path decides it.');
    }
    if (body.webhook !== undefined) {
      let url: URL | undefined;
      try {
        url = new URL(String(body.webhook));
      } catch {
        url = undefined;
      }
      if (typeof body.webhook !== 'string' || !url || url.protocol !== 'https:')
        return problem(res, 422, 'Input validation failed', 'webhook must be an HTTPS URL.');
    }
    if (body.webhook_events_filter !== undefined) {
      const filter = body.webhook_events_filter;
      if (!Array.isArray(filter) || filter.some((event) => !EVENTS.has(event as string))) {
        return problem(res, 422, 'Input validation failed', 'webhook_events_filter may hold only start, output, logs and completed.');
      }
    }
    const cancelAfter = req.headers['cancel-after'];
    let deadline: string | undefined;
    if (cancelAfter !== undefined) {
      const match = typeof cancelAfter === 'string' && cancelAfter !== '' ? DURATION.exec(cancelAfter) : null;
      if (!match)
        return problem(
          res,
          400,
          'Invalid Cancel-After header',
          `Cancel-After must be a duration such as 30s, 5m or 1h30m, not ${JSON.stringify(cancelAfter)}.`,
        );
      const seconds = Number(match[1] ?? 0) * 3600 + Number(match[2] ?? 0) * 60 + Number(match[3] ?? 0);
      if (seconds <= 0) return problem(res, 400, 'Invalid Cancel-After header', 'Cancel-After must be longer than zero.');
      deadline = new Date(Date.now() + seconds * 1000).toISOString();
    }
    const scenario = scenarios.get(ref);
    if (!scenario) {
      if (versionRequired)
        return problem(res, 422, 'Invalid version or not permitted', "The specified version does not exist (or perhaps you don't have permission to use it?)");
      return problem(res, 404, 'Not found', 'The requested resource could not be found.');
    }
    const id = randomBytes(13)
      .toString('base64url')
      .toLowerCase()
      .replace(/[^a-z0-9]/g, 'q')
      .slice(0, 26);
    const p: Record<string, unknown> = {
      id,
      model: ref.startsWith('version:') ? 'owner/versioned' : ref.split(':')[1],
      version: ref.startsWith('version:') ? ref.slice('version:'.length).split(':').pop() : 'hidden',
      input: body.input,
      logs: '',
      output: null,
      data_removed: false,
      error: null,
      status: 'starting',
      created_at: new Date().toISOString(),
      urls: {
        web: `https://replicate.com/p/${id}`,
        get: `${origin}/v1/predictions/${id}`,
        cancel: `${origin}/v1/predictions/${id}/cancel`,
      },
      ...(ref.startsWith('deployment:') ? { deployment: ref.slice('deployment:'.length) } : {}),
      ...(deadline ? { deadline } : {}),
    };
    predictions.set(id, { scenario, polls: 0, step: 'starting', logLines: 0, json: p });
    creates.push({ path, headers: req.headers, body, predictionId: id });
    json(res, 201, p);
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', origin);
    const path = url.pathname;
    const method = req.method ?? 'GET';

    if (path.startsWith('/files/')) {
      const bytes = files.get(decodeURIComponent(path.slice('/files/'.length)));
      if (!bytes || method !== 'GET') return problem(res, 404, 'Not found', 'The file has expired or never existed.');
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) });
      res.end(bytes);
      return;
    }

    const auth = req.headers.authorization;
    if (!auth) return problem(res, 401, 'Unauthenticated', 'You did not pass an authentication token');
    if (auth !== `Bearer ${options.token}`) return problem(res, 401, 'Unauthenticated', 'You did not pass a valid authentication token');

    let match: RegExpExecArray | null;
    const only = (allowed: string) => {
      if (method === allowed) return true;
      problem(res, 405, 'Method not allowed', `Method "${method}" not allowed.`, { allow: allowed });
      return false;
    };
    if (path === '/v1/predictions') {
      if (only('POST')) await create(req, res, path, '', true);
      return;
    }
    if ((match = new RegExp(`^/v1/models/${OWNER_NAME}/predictions$`).exec(path))) {
      if (only('POST')) await create(req, res, path, `model:${match[1]}/${match[2]}`, false);
      return;
    }
    if ((match = new RegExp(`^/v1/deployments/${OWNER_NAME}/predictions$`).exec(path))) {
      if (only('POST')) await create(req, res, path, `deployment:${match[1]}/${match[2]}`, false);
      return;
    }
    if ((match = /^\/v1\/predictions\/([a-z0-9]+)$/.exec(path))) {
      if (!only('GET')) return;
      counts.get += 1;
      if (misbehaved('get', res)) return;
      const stored = predictions.get(match[1]!);
      if (!stored) return problem(res, 404, 'Not found', 'Not found.');
      if (stored.scenario.advance !== 'manual' && stored.step !== 'ended') {
        stored.polls += 1;
        step(stored);
      }
      return json(res, 200, stored.json);
    }
    if ((match = /^\/v1\/predictions\/([a-z0-9]+)\/cancel$/.exec(path))) {
      if (!only('POST')) return;
      counts.cancel += 1;
      if (misbehaved('cancel', res)) return;
      const stored = predictions.get(match[1]!);
      if (!stored) return problem(res, 404, 'Not found', 'Not found.');
      if (!TERMINAL.has(stored.json.status as string)) {
        stored.step = 'ended';
        stored.json.status = 'canceled';
        stored.json.completed_at = new Date().toISOString();
      }
      return json(res, 200, stored.json);
    }
    problem(res, 404, 'Not found', 'The requested resource could not be found.');
  }

  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ detail: String(error), status: 500 }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    baseUrl: `${origin}/v1`,
    origin,
    scenario: (ref, scenario) => {
      scenarios.set(ref, scenario);
    },
    file(name, bytes) {
      files.set(name, bytes);
      return `${origin}/files/${encodeURIComponent(name)}`;
    },
    removeFile: (name) => {
      files.delete(name);
    },
    misbehave: (kind, ...behaviours) => {
      queue[kind].push(...behaviours);
    },
    calm() {
      for (const kind of Object.keys(queue) as RequestKind[]) queue[kind] = [];
    },
    creates,
    submissions: (prompt) => creates.filter((c) => (c.body.input as Record<string, unknown>).prompt === prompt).length,
    counts,
    prediction: (id) => predictions.get(id)?.json,
    advance(id) {
      const stored = predictions.get(id);
      if (!stored) throw new Error(`no prediction ${id}`);
      if (stored.step === 'starting') {
        stored.polls = stored.scenario.startingPolls ?? 1;
        step(stored);
      } else if (stored.step === 'processing') {
        finishWith(stored);
      }
      return stored.json;
    },
    webhook(id, options_ = {}) {
      const secret = options_.secret ?? options.webhookSecret;
      if (!secret) throw new Error('the fake has no webhook secret');
      const p = predictions.get(id)?.json;
      if (!p) throw new Error(`no prediction ${id}`);
      const body = Buffer.from(JSON.stringify(p));
      const msgId = options_.msgId ?? `msg_${randomBytes(12).toString('hex')}`;
      const at = options_.at ?? new Date();
      const signature = new Webhook(secret).sign(msgId, at, body.toString('utf8'));
      return {
        headers: {
          'content-type': 'application/json',
          'webhook-id': msgId,
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body,
      };
    },
    async close() {
      for (const res of hanging) res.destroy();
      hanging.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- Fixtures for the adapter's tests: a context whose fetchOutput runs the egress guard (narrowed to
// 127.0.0.1), an adapter on this fake, a job, a recorder of updates, and small media files.
export const TOKEN = 'r8_TestTokenThatMustNeverLeak0123456789';
export const SECRET = `whsec_${Buffer.from('a test signing key of 32 bytes!!').toString('base64')}`;
export const EVENTS_URL = 'https://gen.example.com/v1/providers/replicate-test/events';
export const VERSION = 'a'.repeat(64);

export function contextFor(overrides: Partial<AdapterContext> = {}): AdapterContext {
  const maxOutputBytes = overrides.maxOutputBytes ?? 256 * 1024;
  return {
    fetchOutput: guardedFetcher({ allowAddress: (address) => address === '127.0.0.1', maxBytes: maxOutputBytes, timeoutMs: 2_000 }),
    maxResponseBytes: 64 * 1024,
    maxOutputBytes,
    pollIntervalMs: 20,
    requestTimeoutMs: 300,
    now: Date.now,
    ...overrides,
  };
}

export function settingsFor(fake: ReplicateFake, overrides: Partial<ReplicateSettings> = {}): ReplicateSettings {
  return { apiToken: TOKEN, baseUrl: fake.baseUrl, ...overrides };
}

export function adapterFor(
  fake: ReplicateFake,
  target: ReplicateDeploymentTarget,
  context: Partial<AdapterContext> = {},
  settings: Partial<ReplicateSettings> = {},
) {
  return createReplicateAdapter(settingsFor(fake, settings), { id: 'replicate-test', target }, contextFor(context));
}

let jobs = 0;
export function jobFor(overrides: Partial<AdapterJob> = {}): AdapterJob {
  jobs += 1;
  return {
    generationId: `gen_${jobs}`,
    mode: 'text_to_image',
    modelId: 'test/model',
    params: {},
    input: { prompt: `prompt ${jobs} ${Math.random()}` },
    inputs: { images: [], videos: [] },
    deadline: Date.now() + 10_000,
    ...overrides,
  };
}

export { recorder, type Recorder } from '../helpers/updates.ts';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function png(width: number, height: number): Buffer {
  const image = new PNG({ width, height });
  image.data.fill(200);
  return PNG.sync.write(image);
}

export { makeWav as wav } from '../helpers/files.ts';

/** The start of an MP4: an `ftyp` box of brand isom, then an empty `mdat`. */
export function mp4(): Buffer {
  const ftyp = Buffer.alloc(24);
  ftyp.writeUInt32BE(24, 0);
  ftyp.write('ftypisom', 4, 'latin1');
  ftyp.writeUInt32BE(512, 12);
  ftyp.write('isomavc1', 16, 'latin1');
  const mdat = Buffer.alloc(8);
  mdat.writeUInt32BE(8, 0);
  mdat.write('mdat', 4, 'latin1');
  return Buffer.concat([ftyp, mdat]);
}

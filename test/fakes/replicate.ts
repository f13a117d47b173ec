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
 * - streaming (a scenario with `stream`, a model that streams its output):
 *   https://replicate.com/docs/topics/predictions/streaming (the prediction's `urls.stream`; GET it with
 *   `Accept: text/event-stream`, the guide's curl example with `Authorization: Bearer`; events `output`
 *   (plain text), `error` (JSON) and `done` (JSON), `done` coming when the prediction succeeds, is
 *   cancelled or fails; the example event `event: output` / `id: 1690212292:0` / `data: Once upon a time...`);
 *   https://replicate.com/changelog/2024-07-15-streams-always-available-stream-parameter-deprecated (no
 *   `"stream": true` is needed: a model that streams always answers with `urls.stream`; passing it has no
 *   effect there, and for a model that does not stream it answers 422); replicate-javascript 1.4.0 README
 *   ("Streaming": done's data is an empty JSON object; `urls.stream` on streaming.api.replicate.com;
 *   event types output, logs, error, done), lib/stream.js (GETs the URL with `Accept: text/event-stream`
 *   through plain fetch, no token) and index.test.ts (createReadableStream: an `id` on every event, done's
 *   included; several `data:` lines joined by LF); replicate-python replicate/stream.py (sends
 *   `Accept: text/event-stream` and `Cache-Control: no-store` through its authenticated client, checks the
 *   content type, ends at `error` or `done`); the Replicate AsyncAPI description at
 *   events.apis.io/channels/replicate/predictions-stream (error's data `{"detail": ...}`, done's data `{}`
 *   on success or `{"reason": "canceled" | "error"}` otherwise). A language model's final `output` is the
 *   array of its pieces.
 * Where the sources are silent the fake chooses the stricter answer and says so: a body that is not
 * JSON or not `application/json` is refused (400 / 415), a wrong method answers 405, an unknown path 404,
 * and cancelling a finished prediction answers 200 with the prediction unchanged. The stream is served by
 * this server under /streaming/v1/predictions/{id} (Replicate's is another host); it is taken without a
 * token (Replicate's JavaScript client and the browser EventSource of its README send none) or with the
 * right one, and refused (401) with a wrong one; a request without `Accept: text/event-stream` is refused
 * (406); `aborted` ends it like `canceled`; a connection opened late gets every event from the start.
 *
 * Predictions advance one step per GET (deterministic, no clock): `startingPolls` GETs in `starting`,
 * then `processingPolls` in `processing` (one log line added per GET), then the scenario's end. With
 * `advance: 'manual'` only `advance(id)` moves them (event tests). Output files are served by the same
 * server under /files/; a file that is not there answers 404 (an expired output URL).
 *
 * A streaming prediction sends its pieces (a succeeded end's output array, else `stream.pieces`) as
 * `output` events, one every `stream.paceMs` from when it is `processing`, its log lines as `logs` events,
 * and whatever pieces are left, then `done`, the moment it ends (`error` then done with reason `error` for a
 * failure; done with reason `canceled` for a cancel); its `output` holds the pieces sent so far meanwhile.
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
import { HeldAnswers } from '../helpers/held-answers.ts';

export type PredictionStatus = 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'aborted';

export interface Scenario {
  startingPolls?: number;
  processingPolls?: number;
  /** Log lines, one added per GET while processing (the rest at the end). */
  logs?: string[];
  end: { status: 'succeeded'; output: unknown; metrics?: Record<string, unknown> } | { status: 'failed'; error: string } | { status: 'canceled' | 'aborted' };
  advance?: 'poll' | 'manual';
  /** The model streams its output: its predictions carry `urls.stream`. */
  stream?: StreamScenario;
}

export interface StreamScenario {
  /** The pieces sent before a failure or a cancel (a succeeded end sends its output array's). */
  pieces?: string[];
  /** Milliseconds between two pieces while processing; default 10. */
  paceMs?: number;
  /** The server resets each connection once it has sent this many output events (a broken stream). */
  breakAfter?: number;
  /** The origin put in `urls.stream` instead of this server's (a stream URL on another host). */
  origin?: string;
}

export type StreamClose = 'done' | 'client' | 'server';

export interface RecordedStream {
  predictionId: string;
  headers: Record<string, string | string[] | undefined>;
  /** Output events written on this connection. */
  outputs: number;
  /** How it closed: after `done` (ours), by the client, or reset by the server (`breakAfter`); undefined while open. */
  closed?: StreamClose;
}

interface SseEvent {
  event: 'output' | 'logs' | 'error' | 'done';
  data: string;
}

/** A one-shot misbehaviour of the next request of a kind. */
export type Misbehaviour = { status: number; retryAfter?: string; body?: string } | { hang: true } | { malformed: true };

type RequestKind = 'create' | 'get' | 'cancel' | 'stream';

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
  /** A streaming prediction's events so far, and its open connections. */
  stream?: { pieces: string[]; sent: number; events: SseEvent[]; open: Set<ServerResponse>; timer?: NodeJS.Timeout };
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
  /** Every stream connection accepted, in order. */
  streams: RecordedStream[];
  /** Resolves when a stream connection of the prediction closes, with how (at once if one has). */
  streamClosed(id: string): Promise<StreamClose>;
  /**
   * From `holdAnswers(true)` on, a create is taken at once (recorded, its prediction made) but its answer is
   * held until `answer(predictionId)` sends it: a test can then choose the moment Replicate's answer leaves.
   */
  holdAnswers(on: boolean): void;
  /** Sends the held answer of a prediction's create; false if none is held. */
  answer(id: string): boolean;
  /** Creates accepted for a job, keyed by its input's `prompt`. */
  submissions(prompt: string): number;
  /** Requests per kind (GETs of predictions, cancels, creates, stream GETs, refused ones included). */
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
  const queue: Record<RequestKind, Misbehaviour[]> = { create: [], get: [], cancel: [], stream: [] };
  const creates: RecordedCreate[] = [];
  const streams: RecordedStream[] = [];
  const closeWaiters = new Map<string, Array<(how: StreamClose) => void>>();
  const counts = { create: 0, get: 0, cancel: 0, stream: 0, refused: 0 };
  const hanging = new Set<ServerResponse>();
  const held = new HeldAnswers();
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
        startPieces(stored);
      }
      return;
    }
    if (stored.step === 'processing') {
      if (stored.logLines < logs.length) {
        stored.logLines += 1;
        p.logs = logs.slice(0, stored.logLines).join('\n');
        emit(stored, { event: 'logs', data: logs[stored.logLines - 1]! });
      }
      if (stored.polls >= (scenario.processingPolls ?? 1)) finishWith(stored);
    }
  }

  // ---- The stream of a streaming prediction.

  /** A succeeded end's pieces are its output (an array of strings, or one string); otherwise the scenario's. */
  function piecesOf(scenario: Scenario): string[] {
    const end = scenario.end;
    if (end.status === 'succeeded') {
      if (typeof end.output === 'string') return [end.output];
      if (Array.isArray(end.output) && end.output.every((piece) => typeof piece === 'string')) return end.output as string[];
    }
    return scenario.stream?.pieces ?? [];
  }

  function frame(stored: Stored, event: SseEvent, seq: number): string {
    const seconds = Math.floor(Date.parse(stored.json.created_at as string) / 1000);
    // One `data:` line per line of the text (SSE joins them with LF again).
    const data = event.data
      .split(/\r\n|\r|\n/)
      .map((line) => `data: ${line}\n`)
      .join('');
    return `event: ${event.event}\nid: ${seconds}:${seq}\n${data}\n`;
  }

  function emit(stored: Stored, event: SseEvent): void {
    const stream = stored.stream;
    if (!stream || stream.events.at(-1)?.event === 'done') return;
    stream.events.push(event);
    for (const res of stream.open) send(stored, res, event, stream.events.length - 1);
  }

  function send(stored: Stored, res: ServerResponse, event: SseEvent, seq: number): void {
    const record = (res as ServerResponse & { record?: RecordedStream }).record!;
    if (record.closed) return;
    const text = frame(stored, event, seq);
    if (event.event === 'output') record.outputs += 1;
    if (event.event === 'done') {
      record.closed = 'done';
      stored.stream?.open.delete(res);
      res.end(text);
      return;
    }
    const breakAfter = stored.scenario.stream?.breakAfter;
    if (event.event === 'output' && breakAfter !== undefined && record.outputs >= breakAfter) {
      // The connection is reset once this event has left (without the chunked body's end).
      record.closed = 'server';
      stored.stream?.open.delete(res);
      res.write(text, () => res.destroy());
      return;
    }
    res.write(text);
  }

  function nextPiece(stored: Stored): boolean {
    const stream = stored.stream!;
    if (stream.sent >= stream.pieces.length) return false;
    const piece = stream.pieces[stream.sent]!;
    stream.sent += 1;
    // While it runs, a language model's prediction holds the pieces so far as its output.
    stored.json.output = stream.pieces.slice(0, stream.sent);
    emit(stored, { event: 'output', data: piece });
    return true;
  }

  function startPieces(stored: Stored): void {
    const stream = stored.stream;
    if (!stream || stream.timer) return;
    stream.timer = setInterval(
      () => {
        if (stored.step !== 'processing' || !nextPiece(stored)) {
          clearInterval(stream.timer);
        }
      },
      Math.max(1, stored.scenario.stream?.paceMs ?? 10),
    );
  }

  /** The end of a streaming prediction's stream: the pieces left, then error and done, or done. */
  function endStream(stored: Stored): void {
    const stream = stored.stream;
    if (!stream) return;
    clearInterval(stream.timer);
    const status = stored.json.status;
    if (status === 'succeeded') {
      while (nextPiece(stored));
      emit(stored, { event: 'done', data: '{}' });
    } else if (status === 'failed') {
      emit(stored, { event: 'error', data: JSON.stringify({ detail: stored.json.error }) });
      emit(stored, { event: 'done', data: JSON.stringify({ reason: 'error' }) });
    } else {
      emit(stored, { event: 'done', data: JSON.stringify({ reason: 'canceled' }) });
    }
  }

  function closedStream(id: string, how: StreamClose): void {
    const waiters = closeWaiters.get(id) ?? [];
    closeWaiters.delete(id);
    for (const resolve of waiters) resolve(how);
  }

  function openStream(req: IncomingMessage, res: ServerResponse, id: string): void {
    counts.stream += 1;
    const auth = req.headers.authorization;
    if (auth !== undefined && auth !== `Bearer ${options.token}`) return problem(res, 401, 'Unauthenticated', 'You did not pass a valid authentication token');
    if (!String(req.headers.accept ?? '').includes('text/event-stream'))
      return problem(res, 406, 'Not acceptable', 'The stream is served as text/event-stream only (Accept: text/event-stream).');
    if (misbehaved('stream', res)) return;
    const stored = predictions.get(id);
    if (!stored?.stream) return problem(res, 404, 'Not found', 'Not found.');
    const record: RecordedStream = { predictionId: id, headers: req.headers, outputs: 0 };
    streams.push(record);
    Object.assign(res, { record });
    res.on('close', () => {
      if (!record.closed) record.closed = 'client';
      stored.stream?.open.delete(res);
      closedStream(id, record.closed);
    });
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' });
    res.flushHeaders();
    stored.stream.open.add(res);
    // A connection opened late gets every event from the first.
    stored.stream.events.forEach((event, seq) => send(stored, res, event, seq));
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
    endStream(stored);
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
    if (body.stream !== undefined && typeof body.stream !== 'boolean') return problem(res, 422, 'Input validation failed', 'stream must be a boolean.');
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
    // The deprecated `"stream": true` changes nothing for a model that streams; one that does not refuses it.
    if (body.stream === true && !scenario.stream) return problem(res, 422, 'Input validation failed', 'This model does not support streaming.');
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
        ...(scenario.stream ? { stream: `${scenario.stream.origin ?? origin}/streaming/v1/predictions/${id}` } : {}),
      },
      ...(ref.startsWith('deployment:') ? { deployment: ref.slice('deployment:'.length) } : {}),
      ...(deadline ? { deadline } : {}),
    };
    predictions.set(id, {
      scenario,
      polls: 0,
      step: 'starting',
      logLines: 0,
      json: p,
      ...(scenario.stream ? { stream: { pieces: piecesOf(scenario), sent: 0, events: [], open: new Set<ServerResponse>() } } : {}),
    });
    creates.push({ path, headers: req.headers, body, predictionId: id });
    const answer = structuredClone(p); // the prediction as it was when created
    if (held.hold(id, () => json(res, 201, answer))) hanging.add(res); // destroyed by close() if never sent
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

    const streamPath = /^\/streaming\/v1\/predictions\/([a-z0-9]+)$/.exec(path);
    if (streamPath) {
      if (method !== 'GET') return problem(res, 405, 'Method not allowed', `Method "${method}" not allowed.`, { allow: 'GET' });
      return openStream(req, res, streamPath[1]!);
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
        endStream(stored);
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
    holdAnswers(on) {
      held.holding = on;
    },
    answer: (id) => held.answer(id),
    creates,
    streams,
    streamClosed(id) {
      const closed = streams.find((s) => s.predictionId === id && s.closed !== undefined);
      if (closed) return Promise.resolve(closed.closed!);
      return new Promise((resolve) => closeWaiters.set(id, [...(closeWaiters.get(id) ?? []), resolve]));
    },
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
      for (const stored of predictions.values()) {
        clearInterval(stored.stream?.timer);
        for (const res of stored.stream?.open ?? []) res.destroy();
      }
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

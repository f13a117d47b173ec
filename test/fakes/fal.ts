/**
 * A fake of fal's queue API, as strict as its documentation and official client let us know it.
 *
 * Sources:
 * - https://docs.fal.ai/model-endpoints/queue and https://fal.ai/docs/api-reference/inference-api: submit
 *   `POST {queue}/{owner}/{app}[/{subpath}]` answering `request_id`, `status_url`, `response_url`,
 *   `cancel_url` (which drop the subpath); `GET .../requests/{id}/status[?logs=1]` answering IN_QUEUE
 *   (`queue_position`), IN_PROGRESS (`logs`), COMPLETED (`metrics`), with HTTP 202 until complete and 200
 *   then; `GET .../requests/{id}` the result; `PUT .../requests/{id}/cancel` answering
 *   CANCELLATION_REQUESTED (202), ALREADY_COMPLETED (400) or NOT_FOUND (404) (fal.ai/docs/inference-api/queue/cancel).
 * - https://docs.fal.ai/model-endpoints/webhooks: `?fal_webhook=`, the delivery `{request_id,
 *   gateway_request_id, status: OK|ERROR, payload, error}`, and its ED25519 signature over
 *   `request_id \n user_id \n timestamp \n sha256-hex(body)` in the X-Fal-Webhook-* headers.
 * - https://docs.fal.ai/model-apis/errors and /request-errors: 422 `{"detail":[{loc,msg,type}]}`,
 *   `content_policy_violation`, `{"detail": "...", "error_type": "..."}`.
 * - @fal-ai/client 1.10.1 (node_modules/@fal-ai/client/src/queue.js, request.js, response.js, types/common.d.ts)
 *   and fal-ai/fal-js libs/client/src/queue.spec.ts: `Authorization: Key <key>`, JSON bodies, the status shapes.
 *
 * Not documented, chosen here: the wording of 401/404/405 bodies; the result of a request that is not
 * complete (400 "Request is still in progress"); and of a cancelled one (400 "Request was cancelled").
 *
 * A request moves on each status poll, never on a clock: through `queue` positions, then `progress` polls
 * IN_PROGRESS (one log line each), then COMPLETED; `hold` keeps it where it is until `advance`.
 */
import { createHash, sign, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { HeldAnswers } from '../helpers/held-answers.ts';

export interface FakeEndpoint {
  /** Input fields the app requires: without one, the request completes with fal's 422 validation error. */
  required?: string[];
  /** Fields that must hold an image, as an http(s) URL or a data URI (decoded and checked here). */
  imageFields?: string[];
  /** What the app answers for a valid input; file URLs come from `fake.host(...)`. */
  result(input: Record<string, unknown>, fake: FakeFal): unknown;
}

export interface RequestScript {
  /** Queue positions answered on successive polls while IN_QUEUE (default [1, 0]). */
  queue?: number[];
  /** Polls answered IN_PROGRESS before COMPLETED, each adding a log line (default 2). */
  progress?: number;
  /** Stays in its phase until `advance` (no move on polls). */
  hold?: boolean;
  /** What the result URL answers instead of the app's result. */
  outcome?: { status: number; body: unknown };
}

export type Route = 'submit' | 'status' | 'result' | 'cancel' | 'file';
export type Fault = { status: number; body?: unknown; headers?: Record<string, string> } | { hang: true } | { malformed: true } | { reset: true };

export interface FakeRequest {
  id: string;
  endpoint: string;
  app: string;
  input: Record<string, unknown>;
  webhook?: string;
  phase: 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED';
  script: Required<Omit<RequestScript, 'outcome'>> & { outcome?: { status: number; body: unknown } };
  polls: number;
  progressPolls: number;
  logs: { message: string; level: string; source: string; timestamp: string }[];
  outcome?: { status: number; body: unknown };
  cancelled: boolean;
  /** Input images as the fake decoded them. */
  images: { field: string; contentType: string; width?: number; height?: number }[];
}

export interface FakeFalOptions {
  key: string;
  endpoints: Record<string, FakeEndpoint>;
  /** Signs webhooks (an Ed25519 private key); without it, no webhook is sent. */
  signingKey?: KeyObject;
  userId?: string;
}

export interface FakeFal {
  url: string;
  /** Submissions accepted, in all and per endpoint id. */
  submissions: number;
  submissionsByEndpoint: Map<string, number>;
  requests: Map<string, FakeRequest>;
  /** Every call, in order: `GET /fal-ai/flux/requests/<id>/status?logs=1`. */
  calls: string[];
  /** Cancel calls and what they answered. */
  cancels: { id: string; status: number; answer: string }[];
  /** Webhook deliveries sent, and our endpoint's answer status. */
  webhooks: { id: string; status: number }[];
  /** File fetches, and those that carried an Authorization header (the key must never reach the CDN). */
  fileFetches: number;
  filesWithAuthorization: number;
  /** The script of the next submitted request; with `every`, of every request submitted until the next call. */
  script(next: RequestScript, every?: boolean): void;
  /**
   * From `holdAnswers(true)` on, a submission is taken at once (counted, its request created) but its answer
   * is held until `answer(id)` sends it: a test can then choose the moment fal's answer leaves, for each one.
   */
  holdAnswers(on: boolean): void;
  /** Sends the held answer of a request's submission; false if none is held. */
  answer(id: string): boolean;
  /** Misbehaves on `route` for the next `times` calls. */
  fault(route: Route, fault: Fault, times?: number): void;
  /** Serves bytes as a CDN file and answers its URL. */
  host(name: string, bytes: Buffer): string;
  /** The file answers 404 from now on, as an expired URL does. */
  expire(name: string): void;
  /** Moves a request to a phase (COMPLETED computes its outcome and sends its webhook). */
  advance(id: string, phase: 'IN_PROGRESS' | 'COMPLETED'): Promise<void>;
  /** A signed webhook delivery of a completed request, as fal would send it now (for replays and forgeries). */
  delivery(id: string, at?: number): { headers: Record<string, string>; body: Buffer };
  /** Whether webhooks are sent on completion (default true). */
  sendWebhooks: boolean;
  close(): Promise<void>;
}

const NAMESPACES = ['workflows', 'comfy'];
let requestCounter = 0;

export async function startFakeFal(options: FakeFalOptions): Promise<FakeFal> {
  const files = new Map<string, Buffer | 'expired'>();
  const faults = new Map<Route, Fault[]>();
  let nextScript: RequestScript | undefined;
  let everyScript = false;
  const held = new HeldAnswers();
  const hung = new Set<http.ServerResponse>();
  const userId = options.userId ?? 'user-fake-1';

  const fake: FakeFal = {
    url: '',
    submissions: 0,
    submissionsByEndpoint: new Map(),
    requests: new Map(),
    calls: [],
    cancels: [],
    webhooks: [],
    fileFetches: 0,
    filesWithAuthorization: 0,
    sendWebhooks: true,
    script(next, every = false) {
      nextScript = next;
      everyScript = every;
    },
    holdAnswers(on) {
      held.holding = on;
    },
    answer: (id) => held.answer(id),
    fault(route, fault, times = 1) {
      const list = faults.get(route) ?? [];
      for (let i = 0; i < times; i++) list.push(fault);
      faults.set(route, list);
    },
    host(name, bytes) {
      files.set(name, bytes);
      return `${fake.url}/files/${name}`;
    },
    expire(name) {
      files.set(name, 'expired');
    },
    async advance(id, phase) {
      const request = fake.requests.get(id);
      if (!request) throw new Error(`no request ${id}`);
      if (phase === 'IN_PROGRESS') request.phase = 'IN_PROGRESS';
      else await complete(request);
    },
    delivery(id, at = Date.now()) {
      const request = fake.requests.get(id);
      if (!request?.outcome) throw new Error(`request ${id} is not complete`);
      return signedDelivery(request, at);
    },
    close: async () => {
      for (const response of hung) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  function signedDelivery(request: FakeRequest, at: number): { headers: Record<string, string>; body: Buffer } {
    if (!options.signingKey) throw new Error('the fake has no signing key');
    const ok = request.outcome!.status >= 200 && request.outcome!.status < 300;
    const body = Buffer.from(
      JSON.stringify({
        request_id: request.id,
        gateway_request_id: request.id,
        status: ok ? 'OK' : 'ERROR',
        payload: request.outcome!.body,
        ...(ok ? {} : { error: `Invalid status code: ${request.outcome!.status}` }),
      }),
    );
    const timestamp = String(Math.floor(at / 1000));
    const digest = createHash('sha256').update(body).digest('hex');
    const signature = sign(null, Buffer.from(`${request.id}\n${userId}\n${timestamp}\n${digest}`), options.signingKey).toString('hex');
    return {
      headers: {
        'content-type': 'application/json',
        'x-fal-webhook-request-id': request.id,
        'x-fal-webhook-user-id': userId,
        'x-fal-webhook-timestamp': timestamp,
        'x-fal-webhook-signature': signature,
      },
      body,
    };
  }

  async function complete(request: FakeRequest): Promise<void> {
    if (request.phase === 'COMPLETED') return;
    const outcome = request.script.outcome ?? (await outcomeOf(request));
    // A cancel may have completed it while the outcome was made.
    if ((request.phase as FakeRequest['phase']) === 'COMPLETED') return;
    request.outcome = outcome;
    request.phase = 'COMPLETED';
    if (request.webhook && options.signingKey && fake.sendWebhooks) {
      const { headers, body } = signedDelivery(request, Date.now());
      try {
        const answer = await fetch(request.webhook, { method: 'POST', headers, body });
        fake.webhooks.push({ id: request.id, status: answer.status });
      } catch {
        fake.webhooks.push({ id: request.id, status: 0 });
      }
    }
  }

  async function outcomeOf(request: FakeRequest): Promise<{ status: number; body: unknown }> {
    const endpoint = options.endpoints[request.endpoint]!;
    const missing = (endpoint.required ?? []).filter((field) => request.input[field] === undefined);
    if (missing.length > 0) {
      return { status: 422, body: { detail: missing.map((field) => ({ loc: ['body', field], msg: 'Field required', type: 'missing' })) } };
    }
    for (const field of endpoint.imageFields ?? []) {
      const value = request.input[field];
      const decoded = typeof value === 'string' ? decodeImage(value) : undefined;
      if (!decoded) {
        return {
          status: 422,
          body: {
            detail: [
              {
                loc: ['body', field],
                msg: 'Failed to load the image. Please ensure the image file is not corrupted and is in a supported format.',
                type: 'image_load_error',
              },
            ],
          },
        };
      }
      request.images.push({ field, ...decoded });
    }
    return { status: 200, body: await endpoint.result(request.input, fake) };
  }

  function takeFault(route: Route): Fault | undefined {
    const list = faults.get(route);
    return list && list.length > 0 ? list.shift() : undefined;
  }

  /** Answers a fault; true when one was due. */
  function misbehave(route: Route, res: http.ServerResponse): boolean {
    const fault = takeFault(route);
    if (!fault) return false;
    if ('hang' in fault) {
      hung.add(res);
      return true;
    }
    if ('reset' in fault) {
      res.socket?.destroy();
      return true;
    }
    if ('malformed' in fault) {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status": "IN_PROG');
      return true;
    }
    const body = typeof fault.body === 'string' ? fault.body : JSON.stringify(fault.body ?? { detail: http.STATUS_CODES[fault.status] ?? 'Error' });
    res.writeHead(fault.status, { 'content-type': 'application/json', ...fault.headers }).end(body);
    return true;
  }

  const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };

  const links = (origin: string, request: FakeRequest) => {
    const base = `${origin}/${request.app}/requests/${request.id}`;
    return { request_id: request.id, response_url: base, status_url: `${base}/status`, cancel_url: `${base}/cancel` };
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on(
      'end',
      () =>
        void handle(req, res, Buffer.concat(chunks)).catch((error: unknown) => {
          if (!res.headersSent) json(res, 500, { detail: `fake failure: ${(error as Error).message}` });
        }),
    );
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', fake.url);
    const method = req.method ?? 'GET';
    fake.calls.push(`${method} ${url.pathname}${url.search}`);
    const origin = fake.url;

    const file = /^\/files\/([A-Za-z0-9._-]+)$/.exec(url.pathname);
    if (file) {
      fake.fileFetches += 1;
      if (req.headers.authorization) fake.filesWithAuthorization += 1;
      if (method !== 'GET') return json(res, 405, { detail: 'Method Not Allowed' });
      if (misbehave('file', res)) return;
      const bytes = files.get(file[1]!);
      if (!bytes || bytes === 'expired') return json(res, 404, { detail: 'Not Found' });
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) }).end(bytes);
      return undefined;
    }

    const parts = url.pathname.split('/').filter(Boolean);
    const appLength = NAMESPACES.includes(parts[0] ?? '') ? 3 : 2;
    const app = parts.slice(0, appLength).join('/');
    const rest = parts.slice(appLength);
    const isRequestPath = rest[0] === 'requests' && rest.length >= 2 && rest.length <= 3;
    const endpointId = parts.join('/');
    if (!isRequestPath && !options.endpoints[endpointId]) return json(res, 404, { detail: `Application '${endpointId}' not found` });

    const auth = req.headers.authorization;
    if (auth === undefined) return json(res, 401, { detail: 'Missing authorization header' });
    if (auth !== `Key ${options.key}`) return json(res, 401, { detail: 'Invalid API key' });

    if (!isRequestPath) {
      if (method !== 'POST') return json(res, 405, { detail: 'Method Not Allowed' });
      return submit(req, res, url, endpointId, app, body, origin);
    }
    const request = fake.requests.get(rest[1]!);
    const known = request && request.app === app;
    if (rest.length === 3 && rest[2] === 'status') {
      if (method !== 'GET') return json(res, 405, { detail: 'Method Not Allowed' });
      if (misbehave('status', res)) return;
      if (!known) return json(res, 404, { detail: 'Request not found' });
      return status(res, url, request, origin);
    }
    if (rest.length === 3 && rest[2] === 'cancel') {
      if (method !== 'PUT') return json(res, 405, { detail: 'Method Not Allowed' });
      if (misbehave('cancel', res)) return;
      return cancel(res, known ? request : undefined, rest[1]!);
    }
    if (rest.length === 2) {
      if (method !== 'GET') return json(res, 405, { detail: 'Method Not Allowed' });
      if (misbehave('result', res)) return;
      if (!known) return json(res, 404, { detail: 'Request not found' });
      if (request.phase !== 'COMPLETED') return json(res, 400, { detail: 'Request is still in progress' });
      return json(res, request.outcome!.status, request.outcome!.body, { 'x-fal-request-id': request.id });
    }
    return json(res, 404, { detail: 'Not Found' });
  }

  async function submit(req: http.IncomingMessage, res: http.ServerResponse, url: URL, endpointId: string, app: string, body: Buffer, origin: string) {
    if (misbehave('submit', res)) return;
    if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
      return json(res, 422, {
        detail: [{ loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', type: 'model_attributes_type' }],
      });
    }
    let input: unknown;
    try {
      input = JSON.parse(body.toString('utf8'));
    } catch {
      return json(res, 422, { detail: [{ loc: ['body'], msg: 'JSON decode error', type: 'json_invalid' }] });
    }
    if (!input || typeof input !== 'object' || Array.isArray(input)) {
      return json(res, 422, { detail: [{ loc: ['body'], msg: 'Input should be a valid dictionary', type: 'dict_type' }] });
    }
    const webhook = url.searchParams.get('fal_webhook') ?? undefined;
    if (webhook !== undefined && !/^https?:\/\/[^\s]+$/.test(webhook)) {
      return json(res, 422, { detail: [{ loc: ['query', 'fal_webhook'], msg: 'Input should be a valid URL', type: 'url_parsing' }] });
    }
    const script = { queue: [1, 0], progress: 2, hold: false, ...nextScript };
    if (!everyScript) nextScript = undefined;
    const id = `${(++requestCounter).toString(16).padStart(8, '0')}-fa1f-4a1e-8c0d-${Date.now().toString(16).padStart(12, '0').slice(-12)}`;
    const request: FakeRequest = {
      id,
      endpoint: endpointId,
      app,
      input: input as Record<string, unknown>,
      ...(webhook ? { webhook } : {}),
      phase: 'IN_QUEUE',
      script,
      polls: 0,
      progressPolls: 0,
      logs: [],
      cancelled: false,
      images: [],
    };
    fake.requests.set(id, request);
    fake.submissions += 1;
    fake.submissionsByEndpoint.set(endpointId, (fake.submissionsByEndpoint.get(endpointId) ?? 0) + 1);
    const send = () => json(res, 200, { status: 'IN_QUEUE', ...links(origin, request), queue_position: script.queue[0] ?? 0 }, { 'x-fal-request-id': id });
    if (held.hold(id, send)) hung.add(res); // destroyed by close() if never sent
  }

  async function status(res: http.ServerResponse, url: URL, request: FakeRequest, origin: string) {
    request.polls += 1;
    let position: number | undefined;
    if (!request.script.hold) {
      if (request.phase === 'IN_QUEUE') {
        position = request.script.queue[request.polls - 1];
        if (position === undefined) request.phase = 'IN_PROGRESS';
      }
      if (request.phase === 'IN_PROGRESS') {
        if (request.progressPolls >= request.script.progress) await complete(request);
        else {
          request.progressPolls += 1;
          request.logs.push({
            message: `step ${request.progressPolls} of ${request.script.progress}`,
            level: 'INFO',
            source: 'USER',
            timestamp: new Date().toISOString(),
          });
        }
      }
    } else if (request.phase === 'IN_QUEUE') position = request.script.queue.at(-1) ?? 0;
    const withLogs = url.searchParams.get('logs') === '1';
    const answer: Record<string, unknown> = { status: request.phase, ...links(origin, request) };
    if (request.phase === 'IN_QUEUE') answer.queue_position = position ?? 0;
    if (request.phase !== 'IN_QUEUE' && withLogs) answer.logs = request.logs;
    if (request.phase === 'COMPLETED') answer.metrics = { inference_time: 0.4 };
    json(res, request.phase === 'COMPLETED' ? 200 : 202, answer);
  }

  function cancel(res: http.ServerResponse, request: FakeRequest | undefined, id: string) {
    const answer = (status: number, body: { status: string }) => {
      fake.cancels.push({ id, status, answer: body.status });
      json(res, status, body);
    };
    if (!request) return answer(404, { status: 'NOT_FOUND' });
    if (request.phase === 'COMPLETED') return answer(400, { status: 'ALREADY_COMPLETED' });
    request.cancelled = true;
    request.script.outcome = { status: 400, body: { detail: 'Request was cancelled' } };
    request.phase = 'COMPLETED';
    request.outcome = request.script.outcome;
    return answer(202, { status: 'CANCELLATION_REQUESTED' });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

function decodeImage(value: string): { contentType: string; width?: number; height?: number } | undefined {
  if (/^https?:\/\//.test(value)) return { contentType: 'unknown (URL)' };
  const match = /^data:(image\/[a-z0-9.+-]+);base64,([A-Za-z0-9+/]*={0,2})$/i.exec(value);
  if (!match) return undefined;
  const bytes = Buffer.from(match[2]!, 'base64');
  const contentType = sniffContentType(bytes);
  if (!contentType?.startsWith('image/') || contentType !== match[1]!.toLowerCase()) return undefined;
  return { contentType, ...imageDimensions(bytes) };
}

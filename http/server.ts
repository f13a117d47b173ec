import { randomBytes } from 'node:crypto';
import { propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { ApiError, ERRORS, isApiError } from './errors.ts';
import { assertKeyWorkspace, authenticate, type Authentication } from './auth/authenticate.ts';
import { unifyWorkspace } from './workspace-field.ts';
import { send, sendError, type ResponseState } from './respond.ts';
import { Router, type CompiledRoute } from './router.ts';
import type { Method, Principal, Reply, RequestContext, RouteDef } from './route.ts';
import { describeErrors, unstorableProblem } from './validation.ts';
import { loadUws, readFallbackRequest, readNativeRequest, type RequestHead } from './uws.ts';
import { RequestBodyStream, sendStream } from './body-stream.ts';
import type { Services } from './services.ts';
import { runInRequest } from '../runtime/request-scope.ts';
import { availabilityOf, DatabaseUnavailableError, isDatabaseUnreachable } from '../persistence/availability.ts';
import { ShardNotOwnedError } from '../runtime/actor-directory.ts';
import { FORWARDED_HEADER, type ClusterRouting, type RemotePlacement } from '../runtime/cluster/routing.ts';
import { forwardToOwner, relayAnswer, workspaceMoving } from './forward.ts';
import { isDashboardPath, loadDashboard, serveDashboard, type Dashboard } from './dashboard.ts';
import type { HttpMetrics } from '../runtime/metrics/http.ts';
import { StreamHub } from './streams/hub.ts';
import { SseConnection } from './streams/sse.ts';
import { serveWebSockets } from './streams/ws.ts';

const MAX_URL_LENGTH = 8 * 1024;
const MAX_HEADER_BYTES = 16 * 1024;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;
/** Seconds a client is asked to wait while the database cannot be reached. */
const DATABASE_RETRY_AFTER_S = '2';

/**
 * Request ids: `req_` + 32 hex digits, the first 20 random per process (80 bits), the last 12 a counter.
 * Unique (a process never repeats one; two processes share a prefix with negligible probability) and
 * not guessable across processes, but sequential within one: they correlate, they do not authorise.
 */
const REQUEST_ID_PREFIX = `req_${randomBytes(10).toString('hex')}`;
let requestCounter = 0;
export function newRequestId(): string {
  requestCounter = (requestCounter + 1) % 0x1000000000000;
  return REQUEST_ID_PREFIX + requestCounter.toString(16).padStart(12, '0');
}

export interface HttpServerOptions {
  /** Whether spans are recorded (an exporter is configured); without, the request path makes none. */
  tracing?: boolean;
  /** The web dashboard's files, served at `/` (default: dashboard/dist as built at install). */
  dashboard?: Dashboard;
  /** Requests by route template, method and status, with their duration; undefined when metrics are off. */
  metrics?: HttpMetrics;
}

export interface HttpServer {
  router: Router;
  listen(host: string, port: number): Promise<number>;
  /** Stops accepting connections; requests already received still get their answer. */
  stopAccepting(): void;
  /**
   * Closes every connection still open, idle keep-alive ones included, so that clients holding one do not
   * keep a stopped process alive until they give it up. Forceful: call once no request is being handled.
   */
  closeConnections(): void;
  /** Resolves when no request is being handled. */
  idle(): Promise<void>;
  inFlight(): number;
  /** Closes every live stream (SSE and WebSocket) with a reconnect hint; new ones are refused from then on. */
  closeStreams(): void;
  /** Live streams open now (SSE responses and WebSocket connections). */
  openStreams(): number;
}

/** The uWS front end: routing, body reading with limits, validation, the error envelope, spans. */
export function createHttpServer(services: Services, routes: RouteDef[], options: HttpServerOptions = {}): HttpServer {
  const { uws, engine } = loadUws();
  // The fallback leaves HttpRequest.forEach and friends unimplemented: chosen once, here.
  const readRequest = engine === 'uws-native' ? readNativeRequest : readFallbackRequest;
  const tracing = options.tracing ?? true;
  const dashboard = options.dashboard ?? loadDashboard();
  const metrics = options.metrics;
  const accessLog = services.config.accessLog && services.logger.isLevelEnabled('info');
  // The request scope (log lines carry the request id) costs a promise hook on every promise made while
  // any scope is alive; a silent logger has no use for it. A request answered without awaiting makes none.
  // Tracing on, the scope holds the trace context as well, so it is entered anyway.
  const scoped = tracing || services.logger.level !== 'silent';
  const app: TemplatedApp = uws.App();
  const router = new Router();
  for (const route of routes) router.add(route);
  // Live streams are not requests in flight: idle() does not wait for them; closeStreams() ends them.
  const streams = new StreamHub(services.config.streams.pingMs);
  serveWebSockets(app, services, streams, services.config.streams.maxBufferBytes, services.config.streams.pingMs);

  // The public port, and in cluster mode the internal one the other nodes forward requests to.
  let listenSockets: us_listen_socket[] = [];
  let inFlight = 0;
  let idleWaiters: Array<() => void> = [];
  const finished = () => {
    inFlight--;
    if (inFlight === 0 && idleWaiters.length > 0) {
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const wake of waiters) wake();
    }
  };

  app.any('/*', (res: HttpResponse, req: HttpRequest) => {
    // HttpRequest lives only for this synchronous call: read everything now.
    const head = readRequest(req, res);
    const incomingId = head.headers['x-request-id'];
    const requestId = incomingId && REQUEST_ID.test(incomingId) ? incomingId : newRequestId();
    const state: ResponseState = { aborted: false, finished: false };
    inFlight++;
    res.onAborted(() => {
      state.aborted = true;
      state.onAbort?.();
    });

    const pipeline = new RequestPipeline(services, router, streams, res, state, head, requestId, tracing, dashboard, accessLog);
    const started = metrics ? performance.now() : 0;
    const pending = tracing ? pipeline.runTraced() : scoped ? runInRequest(requestId, runPipeline, pipeline) : pipeline.run();
    if (metrics) {
      // The route template, never the URL: a bounded set of series. A client gone unanswered counts as status 0.
      const measure = () => {
        metrics.request(head.method, pipeline.routeLabel, state.status ?? 0, (performance.now() - started) / 1000);
        finished();
      };
      if (pending) pending.then(measure);
      else measure();
    } else if (pending) pending.then(finished);
    else finished();
  });

  return {
    router,
    listen(host, port) {
      return new Promise((resolve, reject) => {
        app.listen(host, port, (socket) => {
          if (!socket) return reject(new Error(`could not listen on ${host}:${port}`));
          listenSockets.push(socket);
          resolve(uws.us_socket_local_port(socket));
        });
      });
    },
    stopAccepting() {
      for (const socket of listenSockets) uws.us_listen_socket_close(socket);
      listenSockets = [];
    },
    closeConnections() {
      listenSockets = [];
      // The native app's close() (absent from its typings) closes the listen sockets and every connection.
      // The pure-Node fallback has none: closing its listen socket already closed its idle connections.
      (app as TemplatedApp & { close?: () => void }).close?.();
    },
    idle() {
      if (inFlight === 0) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
    inFlight: () => inFlight,
    closeStreams: () => streams.shutdown(),
    openStreams: () => streams.size,
  };
}

function runPipeline(pipeline: RequestPipeline): Promise<void> | undefined {
  return pipeline.run();
}

function guardedRun(pipeline: RequestPipeline): Promise<void> | undefined {
  return pipeline.guarded();
}

type Incoming = RequestHead;

/**
 * One request through the pipeline. Every step continues synchronously when what it waits for is already
 * there (a cached key, no body, a handler that does not await): such a request is answered without a
 * single promise. run() returns a promise only when some step had to wait, and it never rejects.
 */
class RequestPipeline {
  private span: Span | undefined;
  /** The status answered (undefined: none, the client went away first). */
  private status: number | undefined;
  /** error.type of the server span: the class of an unexpected exception, or the 5xx status. */
  private errorType: string | undefined;
  private started = 0;
  private principal: Principal | undefined;
  private workspaceId: string | undefined;
  /** The matched route's template (what spans, metrics and the access log name the request by). */
  routeLabel = 'unmatched';
  /** Headers every answer carries once the caller is known (the X-RateLimit-* of a key). */
  private authHeaders: Record<string, string> | undefined;
  /** The unread body of a `rawBody: 'stream'` route. */
  private bodyStream: RequestBodyStream | undefined;
  /** The bytes of a body read whole (a JSON route's), which a forwarded request's signature covers. */
  private receivedBody: Buffer | undefined;

  constructor(
    private readonly services: Services,
    private readonly router: Router,
    private readonly streams: StreamHub,
    private readonly res: HttpResponse,
    private readonly state: ResponseState,
    private readonly incoming: Incoming,
    private readonly requestId: string,
    private readonly tracing: boolean,
    private readonly dashboard: Dashboard,
    private readonly accessLog: boolean,
  ) {}

  /** The request untraced, in the request scope the caller set (if any). */
  run(): Promise<void> | undefined {
    if (this.accessLog) this.started = performance.now();
    if (!this.accessLog) return this.guarded();
    const pending = this.guarded();
    if (pending) return pending.then(() => this.logAccess());
    this.logAccess();
    return undefined;
  }

  /**
   * The request in its server span: the span is started, then the request runs in a scope holding both its
   * id and the span's context (one store entered, not one for each).
   */
  runTraced(): Promise<void> | undefined {
    if (this.accessLog) this.started = performance.now();
    const { method, headers } = this.incoming;
    const parent = headers.traceparent ? propagation.extract(ROOT_CONTEXT, headers) : ROOT_CONTEXT;
    // The attributes are set once the span exists: none of the samplers the service offers reads them, and
    // given at creation the SDK would copy and check them twice more. A span sampled out records none.
    const span = this.services.tracer.startSpan(method, { kind: SpanKind.SERVER }, parent);
    if (span.isRecording()) span.setAttributes(serverSpanAttributes(this.incoming));
    this.span = span;
    const pending = runInRequest(this.requestId, guardedRun, this, trace.setSpan(parent, this.span));
    if (pending) return pending.then(() => this.finish());
    this.finish();
    return undefined;
  }

  private finish(): void {
    const span = this.span!;
    span.updateName(`${this.incoming.method} ${this.routeLabel}`);
    span.setAttribute('http.route', this.routeLabel);
    if (this.status !== undefined) {
      span.setAttribute('http.response.status_code', this.status);
      // A server span is an error for 5xx answers only (4xx are the client's): error.type is the status then,
      // unless an exception named it already.
      if (this.status >= 500 && this.errorType === undefined) this.errorType = String(this.status);
    }
    if (this.errorType !== undefined) span.setAttribute('error.type', this.errorType);
    span.end();
    if (this.accessLog) this.logAccess();
  }

  /**
   * The access log line (ACCESS_LOG): what was asked, of which route, by whom, and how it went; no body, no
   * header value, no query string.
   */
  private logAccess(): void {
    const principal = this.principal;
    const spanContext = this.span?.spanContext();
    this.services.logger.info(
      {
        access: true,
        method: this.incoming.method,
        route: this.routeLabel,
        status: this.status ?? 0,
        durationMs: Math.round((performance.now() - this.started) * 1000) / 1000,
        requestId: this.requestId,
        ...(spanContext ? { traceId: spanContext.traceId, spanId: spanContext.spanId } : {}),
        ...(principal?.kind === 'key' ? { keyId: principal.keyId } : {}),
        ...(principal?.kind === 'session' ? { userId: principal.userId } : {}),
        ...(this.workspaceId ? { workspaceId: this.workspaceId } : {}),
      },
      'request',
    );
  }

  /** handle(), with every error turned into its answer. */
  guarded(): Promise<void> | undefined {
    let pending: Promise<void> | undefined;
    try {
      pending = this.handle();
    } catch (error) {
      this.fail(error);
      return undefined;
    }
    return pending?.then(undefined, (error: unknown) => this.fail(error));
  }

  private handle(): Promise<void> | undefined {
    const { method, path, rawQuery, headers } = this.incoming;
    const requestId = this.requestId;
    if (this.services.health.draining) {
      this.status = ERRORS.not_ready.status;
      sendError(this.res, this.state, requestId, 'not_ready', 'The service is shutting down.', { 'Retry-After': '1' }, true);
      return undefined;
    }
    if (path.length + rawQuery.length > MAX_URL_LENGTH) throw new ApiError('uri_too_long', `The request URL must be at most ${MAX_URL_LENGTH} bytes.`);
    if (this.incoming.headerBytes > MAX_HEADER_BYTES) {
      throw new ApiError('request_header_fields_too_large', `The request headers must be at most ${MAX_HEADER_BYTES} bytes in all.`);
    }

    const match = this.router.match(method, path);
    if (match.kind === 'not_found') {
      // What no API route takes may be a page or file of the web dashboard (GET only, never under /v1).
      if (method === 'GET' && isDashboardPath(path)) {
        this.routeLabel = 'dashboard';
        if (serveDashboard(this.dashboard, this.res, this.state, requestId, path, headers)) return undefined;
        if (path === '/' && !this.dashboard.index)
          throw new ApiError('not_found', 'The web dashboard is not built: run `npm run build:dashboard` (npm install does it).');
      }
      throw new ApiError('not_found', `No route for ${method} ${truncate(path)}.`);
    }
    if (match.kind === 'method_not_allowed') {
      throw new ApiError('method_not_allowed', `${method} is not allowed here; use ${match.allowed.join(', ')}.`, { Allow: match.allowed.join(', ') });
    }
    const route = match.route;
    this.routeLabel = route.def.path;

    // uWS drops body chunks that arrive before onData is set, so reading starts now, before any await.
    if (route.def.rawBody === 'stream') this.bodyStream = new RequestBodyStream(this.res, hasBody(headers), this.state, () => new ClientGoneError());
    const reading = this.bodyStream ? undefined : this.readBody(route, method, headers);
    reading?.catch(() => {});
    // Cluster mode: a request acting on a workspace another node runs goes there, before authentication.
    const cluster = this.services.cluster;
    if (cluster && route.def.owner && !this.bodyStream) return this.placeInCluster(cluster, route, match.params, reading);
    // Who is calling comes before what they sent: an unauthenticated caller gets 401, not a body error.
    const authn = authenticate(this.services, route.def, { method, headers });
    if (authn instanceof Promise || reading) return this.afterWaiting(route, match.params, authn, reading);
    return this.serve(route, match.params, authn, undefined);
  }

  /**
   * Serves the request here if this node runs its workspace (or it names none); forwards it to the node
   * that does otherwise. A request another node forwarded is never forwarded again: if this node does not
   * run the workspace (any more), the answer is 503 and the client retries.
   */
  private async placeInCluster(
    cluster: ClusterRouting,
    route: CompiledRoute,
    rawParams: Record<string, string>,
    reading: Promise<unknown> | undefined,
  ): Promise<void> {
    const { method, path, rawQuery, headers } = this.incoming;
    let body: unknown;
    try {
      body = reading ? await reading : undefined;
    } catch {
      // A body that cannot be read is answered where it arrived, after authentication as always.
      return this.afterWaiting(route, rawParams, authenticate(this.services, route.def, { method, headers }), reading);
    }
    const target = rawQuery === '' ? path : `${path}?${rawQuery}`;
    const signature = headers[FORWARDED_HEADER];
    // Forwarded by a node only if signed for these very bytes: a body altered on the way is not.
    const forwarded = signature !== undefined && cluster.verify(signature, method, target, this.receivedBody);
    const workspaceId = await route.def.owner!({ params: decodeParams(rawParams), query: parseQuery(rawQuery), body, db: this.services.db });
    if (workspaceId !== undefined) {
      const placement = await cluster.placement(workspaceId);
      if (placement.kind === 'unavailable' || (placement.kind === 'remote' && forwarded)) {
        throw workspaceMoving();
      }
      if (placement.kind === 'remote') return this.forward(cluster, placement, target, body);
    }
    const authn = await authenticate(this.services, route.def, { method, headers });
    this.authHeaders = authn.headers;
    return this.serve(route, rawParams, authn, body);
  }

  /**
   * Sends the request to the owner's internal channel and relays its answer as it is. A JSON
   * body goes as JSON.stringify of what was parsed: those are the bytes signed, and the bytes the owner receives.
   */
  private async forward(cluster: ClusterRouting, owner: RemotePlacement, target: string, body: unknown): Promise<void> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const answer = await forwardToOwner(cluster, this.services.logger, owner, {
      method: this.incoming.method,
      target,
      headers: this.incoming.headers,
      body: payload,
      requestId: this.requestId,
      contentType: payload === undefined ? undefined : 'application/json',
      tracing: this.tracing,
    });
    this.status = answer.status;
    relayAnswer(this.res, this.state, answer);
  }

  /** The rest of handle() once the caller is known and the body read, with as few promises as that takes. */
  private afterWaiting(
    route: CompiledRoute,
    rawParams: Record<string, string>,
    pendingAuthn: Authentication | Promise<Authentication>,
    reading: Promise<unknown> | undefined,
  ): Promise<void> {
    const next = (authn: Authentication): Promise<void> | undefined => {
      this.authHeaders = authn.headers;
      return reading ? reading.then((body) => this.serve(route, rawParams, authn, body)) : this.serve(route, rawParams, authn, undefined);
    };
    if (pendingAuthn instanceof Promise) return pendingAuthn.then(next);
    return next(pendingAuthn) ?? Promise.resolve();
  }

  private serve(route: CompiledRoute, rawParams: Record<string, string>, authn: Authentication, body: unknown): Promise<void> | undefined {
    const { method, path, rawQuery, headers } = this.incoming;
    this.authHeaders = authn.headers;
    if (route.def.needsDatabase !== false && !availabilityOf(this.services.db).available) throw databaseUnavailable();
    const params = decodeParams(rawParams);
    const query = parseQuery(rawQuery);
    assertStorable(params, query, body, headers);
    assertKeyWorkspace(route.def, authn, { params, query, body });
    unifyWorkspace(route.def, { params, query, body });

    if (route.validateParams && !route.validateParams(params)) throw new ApiError('validation_error', describeErrors('path', route.validateParams.errors));
    if (route.validateQuery && !route.validateQuery(query)) throw new ApiError('validation_error', describeErrors('query', route.validateQuery.errors));
    if (route.validateBody && !(body === undefined && route.def.bodyOptional) && !route.validateBody(body))
      throw new ApiError('validation_error', describeErrors('body', route.validateBody.errors));

    this.principal = authn.principal;
    this.workspaceId = authn.principal?.kind === 'key' ? authn.principal.workspaceId : workspaceNamed(params, query, body);
    const ctx: RequestContext = {
      requestId: this.requestId,
      method: method as Method,
      path,
      rawQuery,
      params,
      query,
      body,
      headers,
      remoteAddress: this.incoming.remoteAddress,
      auth: authn.principal,
      services: this.services,
      bodyStream: this.bodyStream,
    };
    const reply = route.def.handler(ctx as never);
    if (reply instanceof Promise) return reply.then((r: Reply) => this.respond(route, r));
    return this.respond(route, reply);
  }

  private respond(route: CompiledRoute, reply: Reply): Promise<void> | undefined {
    const requestId = this.requestId;
    if (reply.relayed) {
      this.status = reply.relayed.status;
      relayAnswer(this.res, this.state, reply.relayed, this.unreadBody());
      return undefined;
    }
    const status = reply.status ?? 200;
    const validate = route.validateResponse.get(status);
    if (!route.def.responses[status] && route.def.responses[status] !== null) {
      throw new Error(`route ${route.def.method} ${route.def.path} answered ${status}, which it does not declare`);
    }
    if (validate && reply.raw === undefined && !validate(reply.body)) {
      throw new Error(`response of ${route.def.method} ${route.def.path} does not match its schema: ${describeErrors('response', validate.errors)}`);
    }
    this.status = status;
    if (reply.sse) {
      if (this.state.aborted || this.state.finished || this.streams.draining) {
        reply.sse.cancel();
        if (!this.state.aborted && !this.state.finished)
          sendError(this.res, this.state, requestId, 'not_ready', 'The service is shutting down.', { 'Retry-After': '1' }, true);
        return undefined;
      }
      const connection = new SseConnection(this.res, this.state, this.streams, this.services.config.streams.maxBufferBytes);
      connection.start(requestId, this.authHeaders);
      reply.sse.attach(connection);
      return undefined;
    }
    if (reply.stream) return sendStream(this.res, this.state, status, requestId, reply.stream.body, reply.stream.length, reply.headers ?? {});
    const payload = reply.raw ?? (reply.body === undefined ? undefined : JSON.stringify(reply.body));
    send(this.res, this.state, status, requestId, payload, reply.headers, this.unreadBody(), this.authHeaders);
    return undefined;
  }

  /**
   * Reads the body for methods that carry one: size limit first, then Content-Type and JSON. Undefined
   * when there is nothing to wait for: no body, or a GET/HEAD, whose body (if any) no route reads.
   */
  private readBody(route: CompiledRoute, method: string, headers: Record<string, string>): Promise<unknown> | undefined {
    if (method === 'GET' || method === 'HEAD') return undefined;
    const declared = headers['content-length'];
    const limit = this.services.config.bodyLimitBytes;
    if (!hasBody(headers)) {
      if (route.validateBody && BODY_METHODS.has(method) && !route.def.bodyOptional) {
        return Promise.reject(new ApiError('validation_error', 'A JSON request body is required.'));
      }
      return undefined;
    }
    if (declared !== undefined && (!/^\d+$/.test(declared) || Number(declared) > limit)) {
      return Promise.reject(new ApiError('payload_too_large', `The request body must be at most ${limit} bytes.`));
    }
    return new Promise((resolve, reject) => {
      this.state.onAbort = () => reject(new ClientGoneError());
      const chunks: Buffer[] = [];
      let size = 0;
      let done = false;
      this.res.onData((chunk, isLast) => {
        if (done) return;
        size += chunk.byteLength;
        if (size > limit) {
          done = true;
          reject(new ApiError('payload_too_large', `The request body must be at most ${limit} bytes.`));
          return;
        }
        // uWS reuses the chunk's memory after this callback returns: copy it.
        chunks.push(Buffer.from(new Uint8Array(chunk)));
        if (!isLast) return;
        done = true;
        const received = Buffer.concat(chunks, size);
        this.receivedBody = received;
        try {
          resolve(route.validateBody ? parseJson(received, headers['content-type']) : undefined);
        } catch (error) {
          reject(error);
        }
      });
    });
  }

  private fail(error: unknown): void {
    const requestId = this.requestId;
    if (error instanceof ClientGoneError) return;
    if (error instanceof ShardNotOwnedError) {
      // Cluster mode: the workspace moved to another node while this request was being served here.
      error = workspaceMoving();
    }
    // The database could not be reached (here, or by an actor on this request's behalf), or a request that
    // needed it failed while it is known to be down: 503, not 500.
    const unreachable = isDatabaseUnreachable(error);
    if (unreachable) availabilityOf(this.services.db).down(error);
    if (!isApiError(error) && (unreachable || error instanceof DatabaseUnavailableError || !availabilityOf(this.services.db).available)) {
      this.services.logger.warn({ err: error, route: this.routeLabel }, 'request failed: the database cannot be reached');
      error = databaseUnavailable();
    }
    if (isApiError(error)) {
      this.status = error.status;
      // After refusing an oversized body the rest of it is not read, so the connection cannot be reused.
      const headers = this.authHeaders ? { ...this.authHeaders, ...error.headers } : error.headers;
      sendError(this.res, this.state, requestId, error.code, error.message, headers, error.code === 'payload_too_large' || this.unreadBody());
      return;
    }
    this.span?.recordException(error as Error);
    this.span?.setStatus({ code: SpanStatusCode.ERROR });
    this.status = 500;
    this.errorType = (error as Error | undefined)?.name || 'Error';
    this.services.logger.error({ err: error, route: this.routeLabel }, 'request failed');
    sendError(
      this.res,
      this.state,
      requestId,
      'internal_error',
      `Something went wrong on our side. Quote request id ${requestId} when reporting it.`,
      this.authHeaders,
      this.unreadBody(),
    );
  }

  /** A streamed body the handler did not read to its end: the rest cannot be skipped, so the connection is closed. */
  private unreadBody(): boolean {
    if (!this.bodyStream) return false;
    this.bodyStream.release();
    return !this.bodyStream.complete;
  }
}

/** The workspace a request names (path, query or body `workspaceId`), for the access log. */
function workspaceNamed(params: Record<string, string>, query: Record<string, unknown>, body: unknown): string | undefined {
  const fromBody = typeof body === 'object' && body !== null ? (body as { workspaceId?: unknown }).workspaceId : undefined;
  for (const value of [params.workspaceId, query.workspaceId, fromBody]) if (typeof value === 'string') return value;
  return undefined;
}

/** Query parameters whose values never reach a span: signatures and tokens of signed URLs, and the like. */
const SECRET_QUERY = /(?:token|sig|signature|secret|key|password|credential|auth)/i;

/** url.query with the value of any parameter named like a secret replaced by REDACTED. */
function redactedQuery(rawQuery: string): string {
  if (!SECRET_QUERY.test(rawQuery)) return rawQuery;
  return rawQuery
    .split('&')
    .map((pair) => {
      const at = pair.indexOf('=');
      return at !== -1 && SECRET_QUERY.test(pair.slice(0, at)) ? `${pair.slice(0, at)}=REDACTED` : pair;
    })
    .join('&');
}

/** The last Host header parsed, and what it gave: clients send the same one request after request. */
let lastHost: { host: string; address?: string; port?: number } = { host: '' };

/** server.address and server.port of a Host header (`name`, `name:port`, `[v6]:port`). */
function serverOfHost(host: string): { address?: string; port?: number } {
  if (lastHost.host === host) return lastHost;
  const match = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(host);
  lastHost = match ? { host, address: match[1]!.replace(/^\[|\]$/g, ''), ...(match[2] ? { port: Number(match[2]) } : {}) } : { host };
  return lastHost;
}

/** The server span's request attributes (HTTP semantic conventions); the Host header gives server.address and server.port. */
function serverSpanAttributes(incoming: Incoming): Record<string, string | number> {
  const { method, path, rawQuery, headers, remoteAddress } = incoming;
  const attributes: Record<string, string | number> = {
    'http.request.method': method,
    'url.scheme': 'http',
    'url.path': path,
    'network.protocol.version': '1.1',
  };
  if (rawQuery !== '') attributes['url.query'] = redactedQuery(rawQuery);
  const host = headers.host;
  if (host) {
    const server = serverOfHost(host);
    if (server.address !== undefined) attributes['server.address'] = server.address;
    if (server.port !== undefined) attributes['server.port'] = server.port;
  }
  if (remoteAddress) attributes['client.address'] = remoteAddress;
  const userAgent = headers['user-agent'];
  if (userAgent) attributes['user_agent.original'] = userAgent;
  return attributes;
}

function hasBody(headers: Record<string, string>): boolean {
  const declared = headers['content-length'];
  const chunked = (headers['transfer-encoding'] ?? '').toLowerCase().includes('chunked');
  return chunked || (declared !== undefined && declared !== '0');
}

function databaseUnavailable(): ApiError {
  return new ApiError('service_unavailable', 'The service cannot reach its database; retry shortly.', { 'Retry-After': DATABASE_RETRY_AFTER_S });
}

/** The client closed the connection before its body arrived: there is no one to answer. */
class ClientGoneError extends Error {}

function parseJson(raw: Buffer, contentType: string | undefined): unknown {
  if (!contentType || !JSON_TYPE.test(contentType)) {
    throw new ApiError('validation_error', 'The request body must be JSON, sent with Content-Type: application/json.');
  }
  if (raw.length === 0) throw new ApiError('validation_error', 'A JSON request body is required.');
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ApiError('validation_error', 'The request body is not valid JSON.');
  }
}

/** Request headers whose values the service stores or looks up in the database. */
const STORED_HEADERS: Array<[name: string, label: string]> = [
  ['idempotency-key', 'Idempotency-Key'],
  ['user-agent', 'User-Agent'],
];

/**
 * Every string a request carries (path parameters, query, the JSON body to any depth, the headers that are
 * stored) must be text PostgreSQL can hold: U+0000 or an unpaired surrogate anywhere, or a body nested
 * past MAX_JSON_DEPTH, is a validation_error naming the field, before any schema, handler or statement sees it.
 */
function assertStorable(params: Record<string, string>, query: Record<string, unknown>, body: unknown, headers: Record<string, string>): void {
  let problem = unstorableProblem(params, 'path') ?? unstorableProblem(query, 'query') ?? unstorableProblem(body, 'body');
  for (const [name, label] of STORED_HEADERS) {
    const value = headers[name];
    if (problem === undefined && value !== undefined) problem = unstorableProblem(value, label);
  }
  if (problem !== undefined) throw new ApiError('validation_error', problem);
}

function decodeParams(raw: Record<string, string>): Record<string, string> {
  const params: Record<string, string> = {};
  for (const name in raw) {
    try {
      params[name] = decodeURIComponent(raw[name]!);
    } catch {
      throw new ApiError('validation_error', `path parameter ${name} has invalid percent-encoding`);
    }
  }
  return params;
}

function parseQuery(raw: string): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  if (raw === '') return query;
  for (const [key, value] of new URLSearchParams(raw)) {
    const existing = query[key];
    if (existing === undefined) query[key] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else query[key] = [existing, value];
  }
  return query;
}

function truncate(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

import { propagation, ROOT_CONTEXT, SpanKind, trace, type Span } from '@opentelemetry/api';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { ApiError, ERRORS } from '../errors.ts';
import { assertKeyWorkspace, authenticate, type Authentication } from '../auth/authenticate.ts';
import { unifyWorkspace } from '../workspace-field.ts';
import { send, sendError, type ResponseState } from '../respond.ts';
import type { CompiledRoute, Router } from '../router.ts';
import type { Method, Principal, Reply, RequestContext } from '../route.ts';
import { describeErrors } from '../validation.ts';
import type { RequestHead } from '../uws.ts';
import { sendStream } from '../send-stream.ts';
import { sendChunked } from '../send-chunked.ts';
import type { Services } from '../services.ts';
import { isDashboardPath, serveDashboard, type Dashboard } from '../dashboard.ts';
import type { StreamHub } from '../streams/hub.ts';
import { SseConnection } from '../streams/sse.ts';
import { requestIdOf } from './request-id.ts';
import type { InFlight } from './in-flight.ts';
import { ClientGoneError, hasBody, readBody } from './body-reader.ts';
import { RequestBodyStream } from './body-stream.ts';
import { placeInCluster, relayAnswer } from './placement.ts';
import { assertStorable, decodeParams, parseQuery } from './request-values.ts';
import { logAccess, workspaceNamed } from './access-log.ts';
import { endServerSpan, serverSpanAttributes } from './span-attributes.ts';
import { answerFailure, databaseUnavailable } from './failure.ts';
import { isOpenAiPath } from '../openai-errors.ts';
import { runInRequest } from '../../runtime/request-scope.ts';
import { availabilityOf } from '../../persistence/availability.ts';
import type { HttpMetrics } from '../../runtime/metrics/http.ts';

const MAX_URL_LENGTH = 8 * 1024;
const MAX_HEADER_BYTES = 16 * 1024;

/** What every request of one server shares: made once, when the server is built. */
export interface PipelineSettings {
  readonly services: Services;
  readonly router: Router;
  /** The live streams, which an SSE answer joins. */
  readonly streams: StreamHub;
  /** Whether spans are recorded (an exporter is configured); without, the request path makes none. */
  readonly tracing: boolean;
  /** The web dashboard's files, served for what no API route takes. */
  readonly dashboard: Dashboard;
  /** Whether each request gets its access log line. */
  readonly accessLog: boolean;
  /** Whether an untraced request runs in a request scope (so that its log lines carry its id). */
  readonly scoped: boolean;
  /** Requests by route template, method and status, with their duration; undefined when metrics are off. */
  readonly metrics: HttpMetrics | undefined;
  /** The requests being handled, which a stop waits for. */
  readonly inFlight: InFlight;
  /** Reads the request's head (the engine's own way: native addon or fallback). */
  readonly readRequest: (req: HttpRequest, res: HttpResponse) => RequestHead;
}

/**
 * The server's handler of every request: the request's id, its count in flight, then the pipeline
 * (traced, in the request scope, or bare), and its metrics once answered.
 */
export function requestHandler(settings: PipelineSettings): (res: HttpResponse, req: HttpRequest) => void {
  const { readRequest, tracing, scoped, metrics, inFlight } = settings;
  return (res, req) => {
    // HttpRequest lives only for this synchronous call: read everything now.
    const head = readRequest(req, res);
    const pipeline = new RequestPipeline(settings, res, head, requestIdOf(head.headers));
    const state = pipeline.state;
    inFlight.started();
    res.onAborted(() => {
      state.aborted = true;
      state.onAbort?.();
    });

    const started = metrics ? performance.now() : 0;
    const pending = tracing ? pipeline.runTraced() : scoped ? runInRequest(pipeline.requestId, runPipeline, pipeline) : pipeline.run();
    if (metrics) {
      // The route template, never the URL: a bounded set of series. A client gone unanswered counts as status 0.
      const measure = () => {
        metrics.request(head.method, pipeline.routeLabel, state.status ?? 0, (performance.now() - started) / 1000);
        inFlight.finished();
      };
      if (pending) pending.then(measure);
      else measure();
    } else if (pending) pending.then(inFlight.finished);
    else inFlight.finished();
  };
}

function runPipeline(pipeline: RequestPipeline): Promise<void> | undefined {
  return pipeline.run();
}

function guardedRun(pipeline: RequestPipeline): Promise<void> | undefined {
  return pipeline.guarded();
}

/**
 * One request through its stages: checks of the head, the route, the body read (body-reader), placement in
 * the cluster (placement), the caller (authentication), the values and their validation, the handler, the
 * answer; any error turned into its answer (failure); then the span ended (span-attributes) and the access
 * log line (access-log). Every step continues synchronously when what it waits for is already there (a
 * cached key, no body, a handler that does not await): such a request is answered without a single
 * promise. run() returns a promise only when some step had to wait, and it never rejects.
 */
class RequestPipeline {
  readonly state: ResponseState = { aborted: false, finished: false };
  span: Span | undefined;
  /** The status answered (undefined: none, the client went away first). */
  status: number | undefined;
  /** error.type of the server span: the class of an unexpected exception, or the 5xx status. */
  errorType: string | undefined;
  started = 0;
  principal: Principal | undefined;
  workspaceId: string | undefined;
  /** The matched route's template (what spans, metrics and the access log name the request by). */
  routeLabel = 'unmatched';
  /** Headers every answer carries once the caller is known (the X-RateLimit-* of a key). */
  authHeaders: Record<string, string> | undefined;
  /** The unread body of a `rawBody: 'stream'` route. */
  private bodyStream: RequestBodyStream | undefined;
  /** The bytes of a body read whole (a JSON route's), which a forwarded request's signature covers. */
  receivedBody: Buffer | undefined;
  /** Errors in OpenAI's shape: a request of the OpenAI-compatible door (http/openai-errors.ts). */
  readonly openAi: boolean;

  constructor(
    private readonly settings: PipelineSettings,
    readonly res: HttpResponse,
    readonly incoming: RequestHead,
    readonly requestId: string,
  ) {
    this.openAi = isOpenAiPath(incoming.path);
  }

  /** The request untraced, in the request scope the caller set (if any). */
  run(): Promise<void> | undefined {
    const accessLog = this.settings.accessLog;
    if (accessLog) this.started = performance.now();
    if (!accessLog) return this.guarded();
    const pending = this.guarded();
    if (pending) return pending.then(() => logAccess(this.settings.services.logger, this));
    logAccess(this.settings.services.logger, this);
    return undefined;
  }

  /**
   * The request in its server span: the span is started, then the request runs in a scope holding both its
   * id and the span's context (one store entered, not one for each).
   */
  runTraced(): Promise<void> | undefined {
    if (this.settings.accessLog) this.started = performance.now();
    const { method, headers } = this.incoming;
    const parent = headers.traceparent ? propagation.extract(ROOT_CONTEXT, headers) : ROOT_CONTEXT;
    // The attributes are set once the span exists: none of the samplers the service offers reads them, and
    // given at creation the SDK would copy and check them twice more. A span sampled out records none.
    const span = this.settings.services.tracer.startSpan(method, { kind: SpanKind.SERVER }, parent);
    if (span.isRecording()) span.setAttributes(serverSpanAttributes(this.incoming));
    this.span = span;
    const pending = runInRequest(this.requestId, guardedRun, this, trace.setSpan(parent, this.span));
    if (pending) return pending.then(() => this.finish());
    this.finish();
    return undefined;
  }

  private finish(): void {
    endServerSpan(this.span!, this);
    if (this.settings.accessLog) logAccess(this.settings.services.logger, this);
  }

  /** handle(), with every error turned into its answer. */
  guarded(): Promise<void> | undefined {
    let pending: Promise<void> | undefined;
    try {
      pending = this.handle();
    } catch (error) {
      answerFailure(this, this.settings.services, error);
      return undefined;
    }
    return pending?.then(undefined, (error: unknown) => answerFailure(this, this.settings.services, error));
  }

  private handle(): Promise<void> | undefined {
    const { services, router, dashboard } = this.settings;
    const { method, path, rawQuery, headers } = this.incoming;
    const requestId = this.requestId;
    if (services.health.draining) {
      this.status = ERRORS.not_ready.status;
      sendError(this.res, this.state, requestId, 'not_ready', 'The service is shutting down.', { 'Retry-After': '1' }, true);
      return undefined;
    }
    if (path.length + rawQuery.length > MAX_URL_LENGTH) throw new ApiError('uri_too_long', `The request URL must be at most ${MAX_URL_LENGTH} bytes.`);
    if (this.incoming.headerBytes > MAX_HEADER_BYTES) {
      throw new ApiError('request_header_fields_too_large', `The request headers must be at most ${MAX_HEADER_BYTES} bytes in all.`);
    }

    const match = router.match(method, path);
    if (match.kind === 'not_found') {
      // What no API route takes may be a page or file of the web dashboard (GET only, never under /v1).
      if (method === 'GET' && isDashboardPath(path)) {
        this.routeLabel = 'dashboard';
        if (serveDashboard(dashboard, this.res, this.state, requestId, path, headers)) return undefined;
        if (path === '/' && !dashboard.index)
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
    const reading = this.bodyStream ? undefined : readBody(this, route, method, headers, services.config.bodyLimitBytes);
    reading?.catch(() => {});
    // Cluster mode: a request acting on a workspace another node runs goes there, before authentication.
    const cluster = services.cluster;
    if (cluster && route.def.owner && !this.bodyStream) return placeInCluster(this, this.settings, cluster, route, match.params, reading);
    // Who is calling comes before what they sent: an unauthenticated caller gets 401, not a body error.
    const authn = authenticate(services, route.def, { method, headers });
    if (authn instanceof Promise || reading) return this.afterWaiting(route, match.params, authn, reading);
    return this.serve(route, match.params, authn, undefined);
  }

  /** The rest of handle() once the caller is known and the body read, with as few promises as that takes. */
  afterWaiting(
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

  /** The caller known and the body read: the values checked and validated, then the route's handler. */
  serve(route: CompiledRoute, rawParams: Record<string, string>, authn: Authentication, body: unknown): Promise<void> | undefined {
    const services = this.settings.services;
    const { method, path, rawQuery, headers } = this.incoming;
    this.authHeaders = authn.headers;
    if (route.def.needsDatabase !== false && !availabilityOf(services.db).available) throw databaseUnavailable();
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
      services,
      bodyStream: this.bodyStream,
    };
    const reply = route.def.handler(ctx as never);
    if (reply instanceof Promise) return reply.then((r: Reply) => this.respond(route, r));
    return this.respond(route, reply);
  }

  /** The handler's reply written: checked against the route's declared responses, then sent, streamed or relayed. */
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
    if (validate && reply.raw === undefined && reply.chunked === undefined && !validate(reply.body)) {
      throw new Error(`response of ${route.def.method} ${route.def.path} does not match its schema: ${describeErrors('response', validate.errors)}`);
    }
    this.status = status;
    if (reply.sse) {
      const streams = this.settings.streams;
      if (this.state.aborted || this.state.finished || streams.draining) {
        reply.sse.cancel();
        if (!this.state.aborted && !this.state.finished)
          sendError(this.res, this.state, requestId, 'not_ready', 'The service is shutting down.', { 'Retry-After': '1' }, true);
        return undefined;
      }
      const connection = new SseConnection(this.res, this.state, streams, this.settings.services.config.streams.maxBufferBytes);
      // The reply's own headers too (the door's X-Generation-Id), as on every other answer.
      connection.start(requestId, reply.headers ? { ...this.authHeaders, ...reply.headers } : this.authHeaders);
      reply.sse.attach(connection);
      return undefined;
    }
    if (reply.chunked) return sendChunked(this.res, this.state, status, requestId, reply.chunked, { ...this.authHeaders, ...reply.headers });
    if (reply.stream) return sendStream(this.res, this.state, status, requestId, reply.stream.body, reply.stream.length, reply.headers ?? {});
    const payload = reply.raw ?? (reply.body === undefined ? undefined : JSON.stringify(reply.body));
    send(this.res, this.state, status, requestId, payload, reply.headers, this.unreadBody(), this.authHeaders);
    return undefined;
  }

  /** A streamed body the handler did not read to its end: the rest cannot be skipped, so the connection is closed. */
  unreadBody(): boolean {
    if (!this.bodyStream) return false;
    this.bodyStream.release();
    return !this.bodyStream.complete;
  }
}

function truncate(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

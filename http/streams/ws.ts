import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from 'uWebSockets.js';
import { Type } from '@sinclair/typebox';
import { ApiError, isApiError } from '../errors.ts';
import { authenticate } from '../auth/authenticate.ts';
import { assertSameOrigin } from '../auth/origin.ts';
import { defineRoute, type Principal } from '../route.ts';
import { sendError, type ResponseState } from '../respond.ts';
import { compileBody } from '../validation.ts';
import { onFallback } from '../uws.ts';
import type { Services } from '../services.ts';
import { GenerationFeed, generationEventIdOf, listOf, WorkspaceFeed } from './feeds.ts';
import type { Frame, FrameSink, OpenStream, StreamHub } from './hub.ts';
import type { HandlerLease } from '../handler-lease.ts';

export const WS_PATH = '/v1/ws';
/** Close codes: 1008 refused (authentication), 1012 the node restarts (reconnect), 1013 the client read too slowly. */
export const WS_CLOSE = { refused: 1008, restart: 1012, slowReader: 1013, tooBig: 1009 } as const;
/** How long a connection may stay unauthenticated (its first message must be `auth`). */
const AUTH_WAIT_MS = 10_000;
/** Subscriptions one connection may hold. */
const MAX_SUBSCRIPTIONS = 100;

/** What the WebSocket asks of a caller: what GET /v1/generations/:id/stream asks (authenticate() reads access). */
const wsAccess = defineRoute({
  method: 'GET',
  path: WS_PATH,
  operationId: 'webSocket',
  summary: 'WebSocket of live events',
  tags: ['streams'],
  access: { scopes: ['generations.read'] },
  responses: { 101: null },
  handler: () => ({}),
});

const ClientMessage = Type.Union([
  Type.Object({ type: Type.Literal('auth'), apiKey: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
  Type.Object(
    {
      type: Type.Literal('subscribe'),
      id: Type.String({ minLength: 1, maxLength: 64 }),
      generationId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
      workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
      mode: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
      status: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
      project: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
      lastEventId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    },
    { additionalProperties: false },
  ),
  Type.Object({ type: Type.Literal('unsubscribe'), id: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false }),
]);
type ClientMessage =
  | { type: 'auth'; apiKey: string }
  | { type: 'subscribe'; id: string; generationId?: string; workspaceId?: string; mode?: string; status?: string; project?: string; lastEventId?: string }
  | { type: 'unsubscribe'; id: string };
const validateMessage = compileBody(ClientMessage);

interface Connection {
  principal: Principal | undefined;
  /** Set while the upgrade authenticated from headers. */
  refusal?: ApiError;
  subscriptions: Map<string, Subscription>;
  authTimer?: NodeJS.Timeout;
  closed: boolean;
  stream?: WsStream;
}

interface Subscription {
  sink: FrameSink;
  stop(): void;
}

/**
 * The WebSocket endpoint: the events of the SSE routes, several subscriptions on one connection
 * (docs/streaming.md). The caller authenticates as for the REST reads: an API key in the upgrade's
 * Authorization header (or the session cookie, from an allowed Origin), or, where headers cannot be set
 * (browsers, and the pure-Node fallback engine, which does not run custom upgrade handlers), as the
 * first message. Backpressure: past `maxBufferBytes` waiting in the socket, the connection is closed (1013).
 */
export function serveWebSockets(app: TemplatedApp, lease: HandlerLease, services: Services, hub: StreamHub, maxBufferBytes: number, pingMs: number): void {
  app.ws<Connection>(WS_PATH, {
    maxPayloadLength: 16 * 1024,
    maxBackpressure: maxBufferBytes * 2,
    closeOnBackpressureLimit: 0,
    idleTimeout: Math.min(960, Math.max(8, Math.ceil((pingMs * 3) / 4000) * 4)),
    sendPingsAutomatically: true,
    upgrade: onFallback ? undefined : lease.hold((res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => upgrade(services, res, req, context)),
    open: lease.hold((ws: WebSocket<Connection>) => {
      const connection = ws.getUserData();
      connection.subscriptions = new Map();
      connection.closed = false;
      connection.principal ??= undefined;
      const stream = new WsStream(ws, hub, maxBufferBytes);
      connection.stream = stream;
      hub.add(stream);
      if (connection.principal) {
        stream.sendJson({ type: 'authenticated' });
      } else {
        connection.authTimer = setTimeout(
          () => refuse(ws, connection, 'unauthenticated', 'Authenticate first: send {"type":"auth","apiKey":"…"} or an Authorization header.'),
          AUTH_WAIT_MS,
        );
        connection.authTimer.unref();
      }
    }),
    message: lease.hold((ws: WebSocket<Connection>, data: ArrayBuffer) => {
      const text = Buffer.from(data).toString('utf8');
      onMessage(services, ws, text).catch((error: unknown) => services.logger.error({ err: error }, 'websocket message failed'));
    }),
    close: lease.hold((ws: WebSocket<Connection>) => {
      const connection = ws.getUserData();
      connection.closed = true;
      if (connection.stream) connection.stream.closed = true;
      if (connection.authTimer) clearTimeout(connection.authTimer);
      for (const subscription of connection.subscriptions.values()) subscription.stop();
      connection.subscriptions.clear();
      if (connection.stream) hub.remove(connection.stream);
    }),
  });
}

/** Native addon: an Authorization header (or a session cookie) is checked before the upgrade, and refused with the error envelope. */
function upgrade(services: Services, res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
  const headers: Record<string, string> = {};
  req.forEach((name, value) => {
    headers[name] = value;
  });
  const key = headers['sec-websocket-key'] ?? '';
  const protocol = headers['sec-websocket-protocol'] ?? '';
  const extensions = headers['sec-websocket-extensions'] ?? '';
  const state: ResponseState = { aborted: false, finished: false };
  res.onAborted(() => {
    state.aborted = true;
  });
  const requestId = `ws_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  const accept = (principal: Principal | undefined) => {
    if (state.aborted) return;
    res.cork(() => res.upgrade<Connection>({ principal, subscriptions: new Map(), closed: false }, key, protocol, extensions, context));
  };
  if (headers.authorization === undefined && headers.cookie === undefined) return accept(undefined);
  authenticatePrincipal(services, headers).then(accept, (error: unknown) => {
    if (state.aborted) return;
    if (isApiError(error)) sendError(res, state, requestId, error.code, error.message, error.headers);
    else sendError(res, state, requestId, 'internal_error');
  });
}

async function authenticatePrincipal(services: Services, headers: Record<string, string>): Promise<Principal> {
  // Browsers send cookies with cross-site WebSockets: a session is accepted only from an allowed Origin.
  if (headers.authorization === undefined) assertSameOrigin(services.config, 'POST', headers);
  const authn = await authenticate(services, wsAccess, { method: 'GET', headers });
  if (!authn.principal) throw new ApiError('unauthenticated');
  return authn.principal;
}

function refuse(ws: WebSocket<Connection>, connection: Connection, code: 'unauthenticated' | 'forbidden' | 'validation_error', message: string): void {
  // A closed uWS WebSocket throws on any use: `closed` is checked before touching it.
  if (connection.closed) return;
  connection.stream?.sendJson({ type: 'error', error: { code, message } });
  connection.closed = true;
  ws.end(WS_CLOSE.refused, code);
}

async function onMessage(services: Services, ws: WebSocket<Connection>, text: string): Promise<void> {
  const connection = ws.getUserData();
  if (connection.closed) return;
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return refuse(ws, connection, 'validation_error', 'Messages are JSON objects.');
  }
  if (!validateMessage(message))
    return refuse(ws, connection, 'validation_error', 'Unknown message: see docs/streaming.md for auth, subscribe and unsubscribe.');
  const msg = message as ClientMessage;
  const stream = connection.stream!;
  if (msg.type === 'auth') {
    if (connection.principal) return;
    try {
      connection.principal = await authenticatePrincipal(services, { authorization: `Bearer ${msg.apiKey}` });
    } catch (error) {
      return refuse(ws, connection, 'unauthenticated', isApiError(error) ? error.message : 'The API key is not valid.');
    }
    if (connection.authTimer) clearTimeout(connection.authTimer);
    if (!connection.closed) stream.sendJson({ type: 'authenticated' });
    return;
  }
  if (!connection.principal) return refuse(ws, connection, 'unauthenticated', 'Authenticate first: send {"type":"auth","apiKey":"…"}.');
  if (msg.type === 'unsubscribe') {
    connection.subscriptions.get(msg.id)?.stop();
    connection.subscriptions.delete(msg.id);
    return;
  }
  await subscribe(services, connection, stream, msg);
}

async function subscribe(services: Services, connection: Connection, stream: WsStream, msg: Extract<ClientMessage, { type: 'subscribe' }>): Promise<void> {
  const fail = (error: unknown) => {
    const envelope = isApiError(error)
      ? { code: error.code, message: error.message }
      : { code: 'internal_error', message: 'Something went wrong on our side.' };
    if (!isApiError(error)) services.logger.error({ err: error }, 'websocket subscription failed');
    stream.sendJson({ type: 'error', subscription: msg.id, error: envelope });
  };
  try {
    if (connection.subscriptions.has(msg.id)) throw new ApiError('validation_error', `Subscription ${msg.id} exists already.`);
    if (connection.subscriptions.size >= MAX_SUBSCRIPTIONS)
      throw new ApiError('validation_error', `At most ${MAX_SUBSCRIPTIONS} subscriptions per connection.`);
    const principal = connection.principal!;
    // The workspace rule of the REST routes: a key names its own workspace.
    if (principal.kind === 'key') {
      if (msg.workspaceId === undefined)
        throw new ApiError('forbidden', `Requests made with an API key must carry its workspace id (workspaceId ${principal.workspaceId}).`);
      if (msg.workspaceId !== principal.workspaceId) throw new ApiError('forbidden', 'This API key belongs to another workspace.');
    }
    const sink = new SubscriptionSink(stream, msg.id, () => connection.subscriptions.delete(msg.id));
    if (msg.generationId !== undefined) {
      const feed = await GenerationFeed.open(services, principal, msg.generationId, msg.workspaceId);
      if (connection.closed) return feed.cancel();
      const last = generationEventIdOf(msg.lastEventId);
      connection.subscriptions.set(msg.id, {
        sink,
        stop: () => {
          feed.cancel();
          sink.release();
        },
      });
      stream.sendJson({ type: 'subscribed', subscription: msg.id });
      feed.attach(sink, last?.seq, last?.output);
    } else {
      for (const [name, value, pattern] of [
        ['mode', msg.mode, /^[a-z_]+(?:,[a-z_]+)*$/],
        ['status', msg.status, /^[a-z]+(?:,[a-z]+)*$/],
      ] as const) {
        if (value !== undefined && !pattern.test(value)) throw new ApiError('validation_error', `${name}: a comma-separated list.`);
      }
      const feed = await WorkspaceFeed.open(services, principal, msg.workspaceId, {
        modes: listOf(msg.mode),
        statuses: listOf(msg.status),
        project: msg.project,
      });
      if (connection.closed) return;
      connection.subscriptions.set(msg.id, {
        sink,
        stop: () => {
          feed.stop();
          sink.release();
        },
      });
      stream.sendJson({ type: 'subscribed', subscription: msg.id });
      feed.attach(sink, msg.lastEventId);
    }
  } catch (error) {
    fail(error);
  }
}

/** One WebSocket connection as the hub sees it, with the bound on what waits in its socket. */
class WsStream implements OpenStream {
  closed = false;

  constructor(
    private readonly ws: WebSocket<Connection>,
    private readonly hub: StreamHub,
    private readonly maxBufferBytes: number,
  ) {}

  sendJson(message: Record<string, unknown>): void {
    if (this.closed) return;
    if (this.ws.getBufferedAmount() > this.maxBufferBytes) return this.cutOff();
    const status = this.ws.send(JSON.stringify(message), false);
    // 2: dropped, past maxBackpressure.
    if (status === 2) this.cutOff();
  }

  ping(): void {
    // The native addon pings by itself (sendPingsAutomatically); the fallback is pinged here.
    if (onFallback && !this.closed) this.ws.ping();
  }

  shutdown(retryMs: number): void {
    this.close(WS_CLOSE.restart, {
      type: 'event',
      event: 'shutdown',
      data: { reason: 'The node is shutting down; reconnect and subscribe with lastEventId.', retryMs },
    });
  }

  private cutOff(): void {
    this.close(WS_CLOSE.slowReader, undefined);
  }

  private close(code: number, last: Record<string, unknown> | undefined): void {
    if (this.closed) return;
    const connection = this.ws.getUserData();
    this.closed = true;
    if (last) this.ws.send(JSON.stringify(last), false);
    connection.closed = true;
    this.hub.remove(this);
    this.ws.end(code, code === WS_CLOSE.slowReader ? 'slow_reader' : 'restart');
  }
}

/** A subscription's frames, tagged with its id, on the connection's socket. */
class SubscriptionSink implements FrameSink {
  private listeners: Array<() => void> = [];
  private released = false;

  constructor(
    private readonly stream: WsStream,
    private readonly id: string,
    private readonly forget: () => void,
  ) {}

  get closed(): boolean {
    return this.released || this.stream.closed;
  }

  send(frame: Frame): void {
    if (this.closed) return;
    this.stream.sendJson({ type: 'event', subscription: this.id, event: frame.event, ...(frame.id !== undefined ? { id: frame.id } : {}), data: frame.data });
  }

  end(final?: Frame): void {
    if (final) this.send(final);
    this.release();
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.listeners.push(listener);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.forget();
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) listener();
  }
}

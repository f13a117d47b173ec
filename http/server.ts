import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { Router } from './router.ts';
import type { RouteDef } from './route.ts';
import { loadUws, readFallbackRequest, readNativeRequest } from './uws.ts';
import type { Services } from './services.ts';
import { loadDashboard, type Dashboard } from './dashboard.ts';
import type { HttpMetrics } from '../runtime/metrics/http.ts';
import { StreamHub } from './streams/hub.ts';
import { serveWebSockets } from './streams/ws.ts';
import { InFlight } from './pipeline/in-flight.ts';
import { requestHandler } from './pipeline/pipeline.ts';
import { HandlerLease } from './handler-lease.ts';

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

/**
 * The uWS front end, assembled: the routes, the WebSocket endpoint, every other request through the request
 * pipeline (http/pipeline/), and listening and stopping.
 */
export function createHttpServer(services: Services, routes: RouteDef[], options: HttpServerOptions = {}): HttpServer {
  const { uws, engine } = loadUws();
  const app: TemplatedApp = uws.App();
  const router = new Router();
  for (const route of routes) router.add(route);
  // Live streams are not requests in flight: idle() does not wait for them; closeStreams() ends them.
  const streams = new StreamHub(services.config.streams.pingMs);
  // The app keeps its handlers for the life of the process: they are let go once it has closed.
  const lease = new HandlerLease();
  serveWebSockets(app, lease, services, streams, services.config.streams.maxBufferBytes, services.config.streams.pingMs);
  const inFlight = new InFlight();
  const tracing = options.tracing ?? true;

  app.any(
    '/*',
    lease.hold(
      requestHandler({
        services,
        router,
        streams,
        tracing,
        dashboard: options.dashboard ?? loadDashboard(),
        accessLog: services.config.accessLog && services.logger.isLevelEnabled('info'),
        // The request scope (log lines carry the request id) costs a promise hook on every promise made while
        // any scope is alive; a silent logger has no use for it. A request answered without awaiting makes none.
        // Tracing on, the scope holds the trace context as well, so it is entered anyway.
        scoped: tracing || services.logger.level !== 'silent',
        metrics: options.metrics,
        inFlight,
        // The fallback leaves HttpRequest.forEach and friends unimplemented: chosen once, here.
        readRequest: engine === 'uws-native' ? readNativeRequest : readFallbackRequest,
      }),
    ),
  );

  // The public port, and in cluster mode the internal one the other nodes forward requests to.
  let listenSockets: us_listen_socket[] = [];
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
      lease.release();
    },
    idle: () => inFlight.idle(),
    inFlight: () => inFlight.size,
    closeStreams: () => streams.shutdown(),
    openStreams: () => streams.size,
  };
}

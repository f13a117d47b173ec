import type { Config } from '../../runtime/config.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import type { Metrics } from '../../runtime/metrics/index.ts';
import type { Telemetry } from '../../runtime/telemetry-sdk.ts';
import { createHttpServer, type HttpServer } from '../../http/server.ts';
import type { RouteDef } from '../../http/route.ts';
import { routeTable } from '../../http/routes/index.ts';
import type { Services } from '../../http/services.ts';
import { StartupError } from './startup-error.ts';
import { withDeadline } from './deadline.ts';

export interface Listening {
  http: HttpServer;
  port: number;
  /** `http://host:port/metrics`, the Prometheus scrape endpoint; undefined when it is off. */
  metricsUrl: string | undefined;
}

/**
 * The HTTP server and its listeners: the public port, the metrics one, and in cluster mode the internal
 * one the other nodes forward requests to. A listener that cannot be opened fails the start with a hint.
 * `last` is disposed after everything else: the connections kept alive are closed there.
 */
export async function buildHttp(
  stack: CleanupStack,
  last: CleanupStack,
  input: { config: Config; logger: Logger; services: Services; routes: RouteDef[] | undefined; telemetry: Telemetry; metrics: Metrics | undefined },
): Promise<Listening> {
  const { config, logger, metrics } = input;
  const http = createHttpServer(input.services, routeTable(input.routes), { tracing: input.telemetry.enabled, metrics: metrics?.http });
  // Idle keep-alive connections would otherwise hold the process until each client times them out; until
  // the very end a request on one is answered 503 not_ready.
  last.defer(() => http.closeConnections());
  // The requests in flight are answered (SHUTDOWN_TIMEOUT_MS at most) before the cluster and the actors stop.
  stack.defer(async () => {
    http.stopAccepting();
    await withDeadline(http.idle(), config.shutdownTimeoutMs, () =>
      logger.warn({ inFlight: http.inFlight() }, 'shutdown: requests still in flight at the deadline'),
    );
  });
  const listen = async <T>(open: () => Promise<T>, hint: string): Promise<T> => {
    try {
      return await open();
    } catch (error) {
      throw new StartupError(`${(error as Error).message}${hint}`);
    }
  };
  const port = await listen(() => http.listen(config.host, config.port), ': is the port in use?');
  // GET /metrics on a listener of its own, which the API's users (and their keys) do not reach.
  const metricsPort = await listen(
    async () => metrics?.listen(),
    ' (METRICS_HOST:METRICS_PORT, the metrics endpoint): is the port in use? OTEL_METRICS_EXPORTER=none turns it off',
  );
  const metricsHost = config.metrics.host.includes(':') ? `[${config.metrics.host}]` : config.metrics.host;
  const metricsUrl = metricsPort !== undefined ? `http://${metricsHost}:${metricsPort}/metrics` : undefined;
  const cluster = config.cluster;
  if (cluster) await listen(() => http.listen(config.host, cluster.internalPort), ' (CLUSTER_INTERNAL_PORT): is the port in use?');
  return { http, port, metricsUrl };
}

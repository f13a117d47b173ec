import http from 'node:http';
import type { Meter } from '@opentelemetry/api';
import { MeterProvider, PeriodicExportingMetricReader, type IMetricReader, type PushMetricExporter as Pushed } from '@opentelemetry/sdk-metrics';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { MetricsConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import { grpcMetadata } from '../otlp-grpc.ts';
import { HttpMetrics } from './http.ts';
import { ActorMetrics } from './actors.ts';
import { PersistenceMetrics, type PoolCounts } from './persistence.ts';
import { WorkMetrics, type WorkSources } from './work.ts';
import { ClusterMetrics } from './cluster.ts';
import { CatalogMetrics } from './catalog.ts';
import { BreakerMetrics } from './breakers.ts';
import { observeProcess } from './process.ts';
import { HistogramSet } from './histograms.ts';
import { SnapshotGauges } from './snapshot-gauges.ts';
import type { Instruments } from './instruments.ts';

export type { WebhookAttemptOutcome, ProviderCallOutcome } from './work.ts';
export type { HttpMetrics, ActorMetrics, PersistenceMetrics, WorkMetrics, ClusterMetrics, CatalogMetrics, BreakerMetrics };

/** Where the observed gauges read from; given once the service has built those parts. */
export interface MetricSources extends WorkSources {
  pool(): PoolCounts | undefined;
  /** Whether this node reaches the database now (false during an outage: docs/operations.md, Database outages). */
  databaseAvailable(): boolean;
}

export interface MetricsOptions {
  serviceName: string;
  version: string;
  logger: Logger;
}

/**
 * The service's metrics: one MeterProvider of its own (not the global one, so that several services in one
 * process keep theirs apart), with pre-created instruments per area. Readers: the Prometheus one, scraped at
 * `GET /metrics` on a listener of its own (METRICS_HOST:METRICS_PORT, apart from the API, which user keys
 * reach), and a periodic OTLP export when configured. With OTEL_METRICS_EXPORTER=none, startMetrics returns
 * undefined and every hook the service calls is skipped.
 */
export class Metrics {
  readonly http: HttpMetrics;
  readonly actors: ActorMetrics;
  readonly persistence: PersistenceMetrics;
  readonly work: WorkMetrics;
  readonly cluster: ClusterMetrics;
  readonly catalog: CatalogMetrics;
  readonly breakers: BreakerMetrics;
  private readonly provider: MeterProvider;
  private readonly prometheus: PrometheusExporter | undefined;
  private readonly stopProcess: () => void;
  private server: http.Server | undefined;
  private sources: MetricSources | undefined;

  /** `pushed`: the OTLP exporter when config.exporters has 'otlp' (startMetrics loads and makes it). */
  constructor(
    private readonly config: MetricsConfig,
    private readonly options: MetricsOptions,
    pushed?: Pushed,
  ) {
    // The hot-path histograms (histograms.ts) are collected by every reader beside the SDK's instruments.
    const histograms = new HistogramSet({ name: 'generation-service', version: options.version });
    // So are the gauges whose series are only what they read now (snapshot-gauges.ts).
    const snapshots = new SnapshotGauges({ name: 'generation-service', version: options.version });
    const readers: IMetricReader[] = [];
    if (config.exporters.includes('prometheus')) {
      this.prometheus = new PrometheusExporter({ preventServerStart: true, withoutScopeInfo: true, metricProducers: [histograms, snapshots] });
      readers.push(this.prometheus);
    }
    if (pushed) {
      readers.push(
        new PeriodicExportingMetricReader({
          exporter: pushed,
          exportIntervalMillis: config.exportIntervalMs,
          exportTimeoutMillis: config.exportTimeoutMs,
          metricProducers: [histograms, snapshots],
        }),
      );
    }
    this.provider = new MeterProvider({
      resource: resourceFromAttributes({ 'service.name': options.serviceName, 'service.version': options.version }),
      readers,
    });
    const meter: Meter = this.provider.getMeter('generation-service', options.version);
    const instruments: Instruments = { meter, histograms, snapshots };
    const failed = (error: unknown) => options.logger.warn({ err: error }, 'metrics: a gauge could not be read');
    this.http = new HttpMetrics(instruments);
    this.actors = new ActorMetrics(instruments);
    this.persistence = new PersistenceMetrics(
      instruments,
      () => this.sources?.pool(),
      () => this.sources?.databaseAvailable(),
    );
    this.work = new WorkMetrics(
      instruments,
      {
        activeGenerations: () => (this.sources ? this.sources.activeGenerations() : Promise.resolve(new Map())),
        pendingDeliveries: () => (this.sources ? this.sources.pendingDeliveries() : Promise.resolve(0)),
      },
      failed,
    );
    this.cluster = new ClusterMetrics(instruments);
    this.catalog = new CatalogMetrics(instruments);
    this.breakers = new BreakerMetrics(instruments, failed);
    this.stopProcess = observeProcess(meter);
  }

  /** The database-backed gauges' sources (the service calls this once its database is open). */
  observe(sources: MetricSources): void {
    this.sources = sources;
  }

  /**
   * Starts the scrape listener (when the Prometheus exporter is on): `GET /metrics` answers the text
   * format, anything else 404. Resolves with the port it listens on, undefined when there is none.
   */
  async listen(): Promise<number | undefined> {
    const prometheus = this.prometheus;
    if (!prometheus) return undefined;
    const server = http.createServer((request, response) => {
      const pathname = (request.url ?? '/').split('?')[0];
      if ((request.method === 'GET' || request.method === 'HEAD') && pathname === '/metrics') {
        prometheus.getMetricsRequestHandler(request, response);
        return;
      }
      response.statusCode = 404;
      response.setHeader('content-type', 'text/plain; charset=utf-8');
      response.end('Not found: metrics are served at GET /metrics\n');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.config.port, this.config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    return (server.address() as { port: number }).port;
  }

  async shutdown(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    this.stopProcess();
    // The last OTLP export goes out now; a collector that cannot be reached does not hold the stop.
    await this.provider.shutdown().catch((error: unknown) => this.options.logger.warn({ err: error }, 'metrics: the last export failed'));
  }
}

/** The metrics of the service, or undefined when OTEL_METRICS_EXPORTER=none. */
export async function startMetrics(config: MetricsConfig, options: MetricsOptions): Promise<Metrics | undefined> {
  if (config.exporters.length === 0) return undefined;
  return new Metrics(config, options, config.exporters.includes('otlp') ? await otlpExporter(config) : undefined);
}

/** The OTLP exporter of the configured protocol, its package loaded only then (each pulls in a transport). */
async function otlpExporter(config: MetricsConfig): Promise<Pushed> {
  const options = { url: config.otlpEndpoint, timeoutMillis: config.exportTimeoutMs };
  switch (config.otlpProtocol) {
    case 'grpc': {
      const { OTLPMetricExporter } = await import('@opentelemetry/exporter-metrics-otlp-grpc');
      return new OTLPMetricExporter({ ...options, metadata: grpcMetadata(config.otlpHeaders) });
    }
    case 'http/json': {
      const { OTLPMetricExporter } = await import('@opentelemetry/exporter-metrics-otlp-http');
      return new OTLPMetricExporter({ ...options, headers: config.otlpHeaders });
    }
    case 'http/protobuf': {
      const { OTLPMetricExporter } = await import('@opentelemetry/exporter-metrics-otlp-proto');
      return new OTLPMetricExporter({ ...options, headers: config.otlpHeaders });
    }
  }
}

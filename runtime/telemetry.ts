import { context, propagation, trace, type Tracer } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import type { Config } from './config.ts';

export interface Telemetry {
  tracer: Tracer;
  enabled: boolean;
  shutdown(): Promise<void>;
}

export interface TelemetryOptions {
  /** Tests pass an in-memory exporter; each span is exported as it ends (after the resource detectors settle, so a moment later). */
  exporter?: SpanExporter;
}

/**
 * Traces through the OpenTelemetry Node SDK. With no exporter configured (the default) the SDK is not
 * started and the API's no-op tracer costs next to nothing on the request path.
 */
export function startTelemetry(config: Config['telemetry'], options: TelemetryOptions = {}): Telemetry {
  const processors: SpanProcessor[] = [];
  if (options.exporter) processors.push(new SimpleSpanProcessor(options.exporter));
  else if (config.tracesExporter === 'otlp') processors.push(new BatchSpanProcessor(new OTLPTraceExporter(otlpOptions(config.otlpEndpoint))));
  else if (config.tracesExporter === 'console') processors.push(new SimpleSpanProcessor(new ConsoleSpanExporter()));

  if (processors.length === 0) {
    return { tracer: trace.getTracer(config.serviceName), enabled: false, shutdown: async () => {} };
  }
  // Traces only: left unset, metricReaders and logRecordProcessors default to OTLP exporters aimed at
  // localhost:4318, which nothing here configured.
  const sdk = new NodeSDK({ serviceName: config.serviceName, spanProcessors: processors, instrumentations: [], metricReaders: [], logRecordProcessors: [] });
  sdk.start();
  return {
    tracer: trace.getTracer(config.serviceName),
    enabled: true,
    async shutdown() {
      await sdk.shutdown();
      // NodeSDK leaves its providers registered as the globals: unregister them, or the next start in
      // this process (tests start several services) keeps handing out tracers of the shut-down one.
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

function otlpOptions(endpoint: string | undefined): { url?: string } {
  if (!endpoint) return {};
  // OTEL_EXPORTER_OTLP_ENDPOINT is a base; the traces path is appended as the specification says.
  return { url: endpoint.endsWith('/v1/traces') ? endpoint : `${endpoint.replace(/\/$/, '')}/v1/traces` };
}

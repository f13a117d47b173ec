import { trace } from '@opentelemetry/api';
import type { Config } from './config.ts';
import type { Telemetry, TelemetryOptions } from './telemetry-sdk.ts';

export type { Telemetry, TelemetryOptions } from './telemetry-sdk.ts';

/**
 * Traces through the OpenTelemetry Node SDK (runtime/telemetry-sdk.ts). With no exporter configured (the
 * default) the SDK is neither started nor loaded, and the API's no-op tracer costs next to nothing on the
 * request path.
 */
export async function startTelemetry(config: Config['telemetry'], options: TelemetryOptions = {}): Promise<Telemetry> {
  if (!options.exporter && config.tracesExporter === 'none') {
    return { tracer: trace.getTracer(config.serviceName), enabled: false, shutdown: async () => {} };
  }
  const { startTracing } = await import('./telemetry-sdk.ts');
  return startTracing(config, options);
}

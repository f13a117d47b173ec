import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Logger } from '../../runtime/logger.ts';
import type { Config } from '../../runtime/config.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import { startTelemetry } from '../../runtime/telemetry.ts';
import type { Telemetry } from '../../runtime/telemetry-sdk.ts';
import { startMetrics, type Metrics } from '../../runtime/metrics/index.ts';
import { activeGenerationCounts, pendingDeliveryCount, poolCounts } from '../../persistence/work-counts.ts';
import type { Database } from '../../persistence/database.ts';
import { availabilityOf } from '../../persistence/availability.ts';
import { packageJson } from './start-settings.ts';

/** Tracing, first started and last stopped: the spans of everything else's stop are exported. */
export async function buildTelemetry(stack: CleanupStack, config: Config, exporter: SpanExporter | undefined): Promise<Telemetry> {
  const telemetry = await startTelemetry(config.telemetry, { exporter, serviceVersion: packageJson.version });
  stack.defer(() => telemetry.shutdown());
  return telemetry;
}

/**
 * Metrics, with the gauges read from the database. Stopped before the database closes: the last OTLP
 * export reads those gauges. Undefined when they are off.
 */
export async function buildMetrics(stack: CleanupStack, config: Config, logger: Logger, db: Database): Promise<Metrics | undefined> {
  const metrics = await startMetrics(config.metrics, { serviceName: config.telemetry.serviceName, version: packageJson.version, logger });
  if (!metrics) return undefined;
  stack.defer(() => metrics.shutdown());
  metrics.observe({
    pool: () => poolCounts(db),
    databaseAvailable: () => availabilityOf(db).available,
    activeGenerations: () => activeGenerationCounts(db),
    pendingDeliveries: () => pendingDeliveryCount(db),
  });
  return metrics;
}

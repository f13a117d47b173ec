import { ValueType, type Attributes, type HrTime } from '@opentelemetry/api';
import { emptyResource } from '@opentelemetry/resources';
import { AggregationTemporality, DataPointType, type CollectionResult, type GaugeMetricData, type MetricProducer } from '@opentelemetry/sdk-metrics';

/** One gauge of a SnapshotGauges: what it reads at each collection is all it exports. */
interface SnapshotGauge {
  name: string;
  description: string;
  unit: string;
  read(): Array<{ value: number; attributes: Attributes }>;
}

function hrTime(): HrTime {
  const ms = Date.now();
  return [Math.floor(ms / 1000), (ms % 1000) * 1e6];
}

/**
 * Gauges whose series are exactly what their callback reads at each collection. The SDK's observable gauge
 * keeps every attribute set it ever saw under cumulative temporality (the Prometheus exporter's), so a gauge
 * labelled with a value that changes (the catalog version) would keep one series per value ever served; a
 * series read here is gone from the next scrape once its callback no longer returns it. Handed to every
 * metric reader as a producer, beside the hot-path histograms.
 */
export class SnapshotGauges implements MetricProducer {
  private readonly gauges: SnapshotGauge[] = [];

  constructor(private readonly scope: { name: string; version: string }) {}

  gauge(name: string, options: { description: string; unit: string }, read: SnapshotGauge['read']): void {
    this.gauges.push({ name, ...options, read });
  }

  async collect(): Promise<CollectionResult> {
    const now = hrTime();
    const metrics: GaugeMetricData[] = [];
    for (const gauge of this.gauges) {
      const points = gauge.read();
      if (points.length === 0) continue;
      metrics.push({
        descriptor: { name: gauge.name, description: gauge.description, unit: gauge.unit, valueType: ValueType.DOUBLE },
        aggregationTemporality: AggregationTemporality.CUMULATIVE,
        dataPointType: DataPointType.GAUGE,
        dataPoints: points.map((point) => ({ startTime: now, endTime: now, attributes: point.attributes, value: point.value })),
      });
    }
    return { resourceMetrics: { resource: emptyResource(), scopeMetrics: [{ scope: this.scope, metrics }] }, errors: [] };
  }
}

import { ValueType, type Attributes, type HrTime } from '@opentelemetry/api';
import { emptyResource } from '@opentelemetry/resources';
import { AggregationTemporality, DataPointType, type CollectionResult, type HistogramMetricData, type MetricProducer } from '@opentelemetry/sdk-metrics';

/** Series one histogram keeps at most; past it, records go to one overflow series (as the SDK does). */
const SERIES_LIMIT = 2_000;
const OVERFLOW: Attributes = { 'otel.metric.overflow': true };

interface Series {
  attributes: Attributes;
  counts: number[];
  count: number;
  sum: number;
  min: number;
  max: number;
}

/**
 * A histogram for the hot path. The SDK's Histogram.record hashes its attributes on every call (sorting the
 * keys, serialising them), a few microseconds each: too much for a request answered in 15. This one keys
 * its series by the attributes object itself, which callers make once per combination and hand over each
 * time (AttributeCache), and adds to plain arrays; readers collect it through HistogramSet, a MetricProducer,
 * as cumulative explicit-bucket histograms, alike to what the SDK's own would export.
 */
export class FastHistogram {
  readonly series = new Map<Attributes, Series>();

  constructor(
    readonly name: string,
    readonly description: string,
    readonly unit: string,
    readonly boundaries: number[],
  ) {}

  record(value: number, attributes: Attributes = NO_ATTRIBUTES): void {
    let series = this.series.get(attributes);
    if (series === undefined) series = this.open(attributes);
    const boundaries = this.boundaries;
    let bucket = 0;
    while (bucket < boundaries.length && value > boundaries[bucket]!) bucket++;
    series.counts[bucket]!++;
    series.count++;
    series.sum += value;
    if (value < series.min) series.min = value;
    if (value > series.max) series.max = value;
  }

  private open(attributes: Attributes): Series {
    if (this.series.size >= SERIES_LIMIT) {
      const overflow = this.series.get(OVERFLOW);
      if (overflow) return overflow;
      attributes = OVERFLOW;
    }
    const series: Series = { attributes, counts: new Array<number>(this.boundaries.length + 1).fill(0), count: 0, sum: 0, min: Infinity, max: -Infinity };
    this.series.set(attributes, series);
    return series;
  }
}

const NO_ATTRIBUTES: Attributes = {};

function hrTime(): HrTime {
  const ms = Date.now();
  return [Math.floor(ms / 1000), (ms % 1000) * 1e6];
}

/** The FastHistograms of the service, handed to every metric reader as a producer. */
export class HistogramSet implements MetricProducer {
  private readonly histograms: FastHistogram[] = [];
  private readonly start = hrTime();

  constructor(private readonly scope: { name: string; version: string }) {}

  histogram(name: string, description: string, unit: string, boundaries: number[]): FastHistogram {
    const histogram = new FastHistogram(name, description, unit, boundaries);
    this.histograms.push(histogram);
    return histogram;
  }

  async collect(): Promise<CollectionResult> {
    const now = hrTime();
    const metrics: HistogramMetricData[] = [];
    for (const histogram of this.histograms) {
      if (histogram.series.size === 0) continue;
      metrics.push({
        descriptor: { name: histogram.name, description: histogram.description, unit: histogram.unit, valueType: ValueType.DOUBLE },
        aggregationTemporality: AggregationTemporality.CUMULATIVE,
        dataPointType: DataPointType.HISTOGRAM,
        dataPoints: [...histogram.series.values()].map((series) => ({
          startTime: this.start,
          endTime: now,
          attributes: series.attributes,
          value: {
            buckets: { boundaries: histogram.boundaries, counts: [...series.counts] },
            count: series.count,
            sum: series.sum,
            min: series.min,
            max: series.max,
          },
        })),
      });
    }
    return { resourceMetrics: { resource: emptyResource(), scopeMetrics: [{ scope: this.scope, metrics }] }, errors: [] };
  }
}

import type { Attributes, Meter } from '@opentelemetry/api';
import type { FastHistogram, HistogramSet } from './histograms.ts';
import type { SnapshotGauges } from './snapshot-gauges.ts';

/** Bucket boundaries in seconds, from the semantic conventions of http.server.request.duration. */
export const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
/** Longer work (provider jobs): up to 10 minutes. */
export const LONG_SECONDS_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Counts (group-commit batch sizes): powers of two up to the largest batch. */
export const COUNT_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096];

/** What each area makes its instruments with: the SDK's meter (counters, gauges), the hot-path histograms and the gauges of the present alone. */
export interface Instruments {
  meter: Meter;
  histograms: HistogramSet;
  snapshots: SnapshotGauges;
}

export function secondsHistogram(instruments: Instruments, name: string, description: string, buckets = SECONDS_BUCKETS): FastHistogram {
  return instruments.histograms.histogram(name, description, 's', buckets);
}

/**
 * Attribute objects by key, made once: the hot path records with the same object each time rather than
 * building one per call. Keys come from bounded sets (route templates, kinds, outcomes), so it stays small;
 * past `limit` distinct keys it stops remembering (a bug elsewhere must not grow it without end).
 */
export class AttributeCache<A extends Attributes> {
  private readonly cache = new Map<string, A>();
  constructor(private readonly limit = 2_000) {}

  get(key: string, make: () => A): A {
    let attributes = this.cache.get(key);
    if (attributes === undefined) {
      attributes = make();
      if (this.cache.size < this.limit) this.cache.set(key, attributes);
    }
    return attributes;
  }
}

/** Series a FastCounter keeps apart; past them, adds go to one overflow series: with it, the 2,000 series of the SDK's cardinality limit. */
const COUNTER_SERIES_LIMIT = 1_999;
const OVERFLOW: Attributes = Object.freeze({ 'otel.metric.overflow': true });

/**
 * A monotonic counter for the hot path: an add is one map update by a key the caller already has, and the
 * SDK sees the totals only when metrics are collected (an observable counter), so it does not hash each
 * add's attributes. Exported as the SDK's own counter would be (a cumulative monotonic sum).
 */
export class FastCounter<A extends Attributes> {
  private readonly series = new Map<string, { attributes: Attributes; value: number }>();

  constructor(instruments: Instruments, name: string, options: { description: string; unit: string }) {
    const counter = instruments.meter.createObservableCounter(name, options);
    counter.addCallback((result) => {
      for (const { attributes, value } of this.series.values()) result.observe(value, attributes);
    });
  }

  /** Adds `value` to the series `key` (one key per distinct attributes); `attributes` are made only for a new series. */
  add(value: number, key: string, attributes: () => A): void {
    let series = this.series.get(key);
    if (series === undefined) {
      if (this.series.size >= COUNTER_SERIES_LIMIT) key = '\u0000overflow';
      series = this.series.get(key);
      if (series === undefined) {
        series = { attributes: key === '\u0000overflow' ? OVERFLOW : attributes(), value: 0 };
        this.series.set(key, series);
      }
    }
    series.value += value;
  }
}

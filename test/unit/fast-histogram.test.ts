import t from 'tap';
import { DataPointType, type Histogram } from '@opentelemetry/sdk-metrics';
import { HistogramSet } from '../../runtime/metrics/histograms.ts';

t.test('buckets are inclusive upper bounds, with one past the last; count, sum, min and max per series', async (t) => {
  const set = new HistogramSet({ name: 'test', version: '1' });
  const histogram = set.histogram('h', 'a histogram', 's', [1, 2, 5]);
  const a = { route: 'a' };
  const b = { route: 'b' };
  for (const value of [0.5, 1, 1.5, 2, 7]) histogram.record(value, a);
  histogram.record(3, b);
  const { resourceMetrics, errors } = await set.collect();
  t.same(errors, []);
  const [metric] = resourceMetrics.scopeMetrics[0]!.metrics;
  t.equal(metric!.descriptor.name, 'h');
  t.equal(metric!.descriptor.unit, 's');
  t.equal(metric!.dataPointType, DataPointType.HISTOGRAM);
  const points = metric!.dataPoints as Array<{ attributes: object; value: Histogram }>;
  t.equal(points.length, 2);
  t.same(points[0]!.attributes, a);
  t.same(points[0]!.value.buckets, { boundaries: [1, 2, 5], counts: [2, 2, 0, 1] });
  t.match(points[0]!.value, { count: 5, sum: 12, min: 0.5, max: 7 });
  t.same(points[1]!.value.buckets.counts, [0, 0, 1, 0]);
});

t.test('an empty histogram is left out; past the series limit, records go to one overflow series', async (t) => {
  const set = new HistogramSet({ name: 'test', version: '1' });
  set.histogram('empty', '', 's', [1]);
  const many = set.histogram('many', '', 's', [1]);
  for (let i = 0; i < 2_100; i++) many.record(0.5, { i });
  const { resourceMetrics } = await set.collect();
  const metrics = resourceMetrics.scopeMetrics[0]!.metrics;
  t.same(
    metrics.map((m) => m.descriptor.name),
    ['many'],
  );
  const points = metrics[0]!.dataPoints as Array<{ attributes: Record<string, unknown>; value: Histogram }>;
  t.equal(points.length, 2_001, 'at most 2,000 series and the overflow one');
  const overflow = points.find((p) => p.attributes['otel.metric.overflow'] === true);
  t.equal(overflow?.value.count, 100);
});

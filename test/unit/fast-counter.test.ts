import t from 'tap';
import { AggregationTemporality, DataPointType, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { FastCounter, type Instruments } from '../../runtime/metrics/instruments.ts';

class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

async function exported(reader: MetricReader) {
  const { resourceMetrics, errors } = await reader.collect();
  const metric = resourceMetrics.scopeMetrics[0]!.metrics[0]!;
  return { errors, metric, points: metric.dataPoints as Array<{ attributes: Record<string, unknown>; value: number }> };
}

t.test('a FastCounter exports cumulative monotonic sums per series, as the SDK counter does', async (t) => {
  const reader = new TestReader();
  const provider = new MeterProvider({ readers: [reader] });
  const counter = new FastCounter({ meter: provider.getMeter('test') } as Instruments, 'c', { description: 'a counter', unit: '{thing}' });
  let made = 0;
  const a = () => {
    made++;
    return { kind: 'a' };
  };
  counter.add(1, 'a', a);
  counter.add(2, 'a', a);
  counter.add(1, 'b', () => ({ kind: 'b' }));
  let { errors, metric, points } = await exported(reader);
  t.same(errors, []);
  t.equal(metric.descriptor.name, 'c');
  t.equal(metric.dataPointType, DataPointType.SUM);
  t.match(metric, { isMonotonic: true, aggregationTemporality: AggregationTemporality.CUMULATIVE });
  t.same(
    points.map((p) => [p.attributes, p.value]),
    [
      [{ kind: 'a' }, 3],
      [{ kind: 'b' }, 1],
    ],
  );
  t.equal(made, 1, "a series' attributes are made once");
  counter.add(4, 'a', a);
  ({ points } = await exported(reader));
  t.same(
    points.map((p) => p.value),
    [7, 1],
    'totals keep growing across collections',
  );
  await provider.shutdown();
});

t.test('past its series limit, adds go to one overflow series', async (t) => {
  const reader = new TestReader();
  const provider = new MeterProvider({ readers: [reader] });
  const counter = new FastCounter({ meter: provider.getMeter('test') } as Instruments, 'c', { description: '', unit: '1' });
  for (let i = 0; i < 2_100; i++) counter.add(1, String(i), () => ({ i }));
  const { points } = await exported(reader);
  t.equal(points.length, 2_000);
  t.same(points.find((p) => p.attributes['otel.metric.overflow'] === true)?.value, 101);
  await provider.shutdown();
});

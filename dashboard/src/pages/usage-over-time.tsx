import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api, withQuery } from '../api.ts';
import { ErrorBox, useLoad } from '../ui.tsx';

/**
 * Usage over time (GET /v1/usage/series): a chart of one figure by hour or day, one line per model, drawn with
 * uPlot — a small (about 50 kB), fast canvas chart made for time series, with no dependencies, kept up by its
 * author since 2019 (Chart.js is four times its size, ECharts twenty) — the breakdown by model and by key, and
 * the CSV export of the same points.
 */

interface Figures {
  generations: { total: number; succeeded: number; failed: number; cancelled: number; expired: number; unfinished: number };
  credits: number;
  creditsFromBalance: number;
  costCents: number;
  tokensIn: number;
  tokensOut: number;
  outputBytes: number;
}
interface Point extends Figures {
  bucket: string;
  group: { model?: string; key?: string };
}
interface Series {
  from: string;
  to: string;
  points: Point[];
  totals: Array<Figures & { group: { model?: string; key?: string } }>;
}

const METRICS = {
  credits: { label: 'Credits charged', of: (f: Figures) => f.credits },
  jobs: { label: 'Generations', of: (f: Figures) => f.generations.total },
  wallet: { label: 'Wallet spend (cents)', of: (f: Figures) => f.costCents },
  tokens: { label: 'Tokens (in + out)', of: (f: Figures) => f.tokensIn + f.tokensOut },
} as const;
type Metric = keyof typeof METRICS;

const RANGES = { day: { days: 30, label: 'last 30 days, by day' }, hour: { days: 2, label: 'last 48 hours, by hour' } } as const;
type Granularity = keyof typeof RANGES;

const COLOURS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

function seriesQuery(workspaceId: string, granularity: Granularity, groupBy: string) {
  const size = granularity === 'hour' ? 3_600_000 : 86_400_000;
  const to = Math.ceil((Date.now() + 1) / size) * size;
  const from = to - RANGES[granularity].days * 86_400_000;
  return { workspaceId, granularity, groupBy, from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

/** Dense columns for uPlot: every bucket of the range, a zero where a model had nothing. */
function columns(series: Series, granularity: Granularity, metric: Metric): { data: uPlot.AlignedData; models: string[] } {
  const size = granularity === 'hour' ? 3_600_000 : 86_400_000;
  const from = Date.parse(series.from);
  const count = Math.round((Date.parse(series.to) - from) / size);
  const times = Array.from({ length: count }, (_, i) => (from + i * size) / 1000);
  const models = [...new Set(series.points.map((p) => p.group.model ?? ''))].sort();
  const lines = models.map(() => new Array<number>(count).fill(0));
  for (const p of series.points) {
    const index = Math.round((Date.parse(p.bucket) - from) / size);
    const line = lines[models.indexOf(p.group.model ?? '')];
    if (line && index >= 0 && index < count) line[index] = METRICS[metric].of(p);
  }
  return { data: [times, ...lines] as uPlot.AlignedData, models };
}

function Chart({ series, granularity, metric }: { series: Series; granularity: Granularity; metric: Metric }) {
  const holder = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = holder.current;
    if (!element) return;
    const { data, models } = columns(series, granularity, metric);
    const chart = new uPlot(
      {
        width: Math.max(320, Math.min(element.clientWidth || 720, 960)),
        height: 260,
        scales: { x: { time: true } },
        series: [{}, ...models.map((model, i) => ({ label: model, stroke: COLOURS[i % COLOURS.length], width: 2, points: { show: data[0].length < 60 } }))],
        axes: [{}, { label: METRICS[metric].label, size: 60 }],
        legend: { show: true },
      },
      data,
      element,
    );
    return () => chart.destroy();
  }, [series, granularity, metric]);
  return (
    <div ref={holder} class="chart" data-testid="usage-chart" role="img" aria-label={`${METRICS[metric].label}, ${RANGES[granularity].label}, by model`} />
  );
}

function Breakdown({ title, rows, name, testId }: { title: string; rows: Series['totals']; name: (g: Point['group']) => string; testId: string }) {
  return (
    <div class="scroll">
      <table data-testid={testId}>
        <caption>{title}</caption>
        <thead>
          <tr>
            <th scope="col">{title.replace(/^By /, '').replace(/^./, (c) => c.toUpperCase())}</th>
            <th scope="col">Generations</th>
            <th scope="col">Succeeded</th>
            <th scope="col">Failed</th>
            <th scope="col">Credits</th>
            <th scope="col">Wallet</th>
            <th scope="col">Tokens in / out</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={name(row.group)} data-group={name(row.group)}>
              <td class="mono small">{name(row.group)}</td>
              <td>{row.generations.total}</td>
              <td>{row.generations.succeeded}</td>
              <td>{row.generations.failed}</td>
              <td>{row.credits}</td>
              <td>${(row.costCents / 100).toFixed(2)}</td>
              <td>
                {row.tokensIn} / {row.tokensOut}
              </td>
            </tr>
          ))}
          {rows.length === 0 && (
            <tr>
              <td colSpan={7} class="muted">
                No generations in this range.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

export function UsageOverTime({ workspaceId }: { workspaceId: string }) {
  const [granularity, setGranularity] = useState<Granularity>('day');
  const [metric, setMetric] = useState<Metric>('credits');
  const byModel = useLoad(() => api<Series>('GET', '/v1/usage/series', { query: seriesQuery(workspaceId, granularity, 'model') }), [workspaceId, granularity]);
  const byKey = useLoad(() => api<Series>('GET', '/v1/usage/series', { query: seriesQuery(workspaceId, granularity, 'key') }), [workspaceId, granularity]);
  const exportUrl = withQuery('/v1/usage/series', { ...seriesQuery(workspaceId, granularity, 'model,key'), format: 'csv' });
  return (
    <section aria-labelledby="over-time-title">
      <h2 id="over-time-title">Usage over time</h2>
      <div class="row filters">
        <label>
          Range
          <select value={granularity} onChange={(e) => setGranularity((e.currentTarget as HTMLSelectElement).value as Granularity)}>
            {Object.entries(RANGES).map(([value, range]) => (
              <option key={value} value={value}>
                {range.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Show
          <select value={metric} onChange={(e) => setMetric((e.currentTarget as HTMLSelectElement).value as Metric)}>
            {Object.entries(METRICS).map(([value, m]) => (
              <option key={value} value={value}>
                {m.label}
              </option>
            ))}
          </select>
        </label>
        <a class="button secondary" href={exportUrl} download data-testid="usage-export">
          Export CSV
        </a>
      </div>
      <ErrorBox error={byModel.error ?? byKey.error} />
      {byModel.data && <Chart series={byModel.data} granularity={granularity} metric={metric} />}
      <div>
        {byModel.data && <Breakdown title="By model" rows={byModel.data.totals} name={(g) => g.model ?? ''} testId="usage-by-model" />}
        {byKey.data && <Breakdown title="By API key" rows={byKey.data.totals} name={(g) => (g.key ? g.key : 'signed in (no key)')} testId="usage-by-key" />}
      </div>
    </section>
  );
}

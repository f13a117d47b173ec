import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const doc = fs.readFileSync(path.join(ROOT, 'docs/observability.md'), 'utf8');
const dashboard = JSON.parse(fs.readFileSync(path.join(ROOT, 'docs/grafana-dashboard.json'), 'utf8')) as {
  panels: Array<{ targets?: Array<{ expr: string }> }>;
};
const source = fs
  .readdirSync(path.join(ROOT, 'runtime/metrics'))
  .map((file) => fs.readFileSync(path.join(ROOT, 'runtime/metrics', file), 'utf8'))
  .join('\n');

/** The metric table of the page: OpenTelemetry name → Prometheus family. */
function documented(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of doc.split('\n')) {
    const match = /^\| `([a-z0-9_.]+)`(?:, `\.max`)? \| `([a-z0-9_]+?)(?:_\*)?`/.exec(line);
    if (match) rows.set(match[1]!, match[2]!);
  }
  return rows;
}

/** A series name as Prometheus sees it, back to its family (the histogram and counter suffixes removed). */
function family(series: string): string {
  return series.replace(/_(bucket|sum|count|total)$/, '');
}

t.test('every metric the code defines is documented, under the name Prometheus gives it', async (t) => {
  const rows = documented();
  const defined = [...source.matchAll(/(?:create\w+|histogram|secondsHistogram)\(\s*(?:instruments,\s*)?'([a-z0-9_.]+)'/g)].map((m) => m[1]!);
  t.ok(defined.length >= 20, `${defined.length} instruments found in runtime/metrics/`);
  for (const name of defined) {
    t.ok(
      rows.has(name) || (name === 'nodejs.eventloop.delay.max' && rows.has('nodejs.eventloop.delay.p99')),
      `${name} is in the table of docs/observability.md`,
    );
  }
  for (const [otel, prometheus] of rows)
    t.equal(
      prometheus,
      otel
        .replace(/\./g, '_')
        .replace(/^process_cpu_time$/, 'process_cpu_time_total')
        .replace(/(refusals|passivations|transitions|handovers|reloads|costs)$/, '$1_total'),
      `${otel} → ${prometheus}`,
    );
});

t.test('the Grafana dashboard queries only documented metrics, and covers the starting queries', async (t) => {
  const families = new Set([...documented().values()].map(family));
  const exprs = dashboard.panels.flatMap((panel) => panel.targets ?? []).map((target) => target.expr);
  t.ok(exprs.length >= 20);
  // Label matchers and grouping lists removed, what is left of the identifiers are metric names.
  const bare = exprs.map((expr) => expr.replace(/\{[^}]*\}/g, '').replace(/\b(?:by|without) \([^)]*\)/g, ''));
  const used = new Set(bare.flatMap((expr) => [...expr.matchAll(/\b((?:gs|http|db|process|v8js|nodejs)_[a-z0-9_]+)\b/g)].map((m) => family(m[1]!))));
  for (const name of used) t.ok(families.has(name) || families.has(`${name}_total`) || name === 'nodejs_eventloop_delay_p99', `${name} is a documented metric`);
  for (const needed of [
    'gs_actor_mailbox_depth',
    'gs_db_commit_duration',
    'gs_webhook_attempt_duration',
    // Providers and routing, the catalog and the database's reach (the alerts' metrics).
    'gs_breaker_state',
    'gs_breaker_transitions',
    'gs_provider_call_duration',
    'gs_provider_attempt_costs',
    'gs_catalog_version',
    'gs_catalog_reloads',
    'gs_db_available',
  ])
    t.ok(used.has(needed), `the dashboard shows ${needed}`);
});

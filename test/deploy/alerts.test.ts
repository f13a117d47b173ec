import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { ROOT } from '../fixtures/child.ts';

/**
 * deploy/prometheus/alerts.yaml, checked offline: `promtool check rules` (Debian's prometheus package ships
 * promtool; .ci/run installs it) and its unit tests `promtool test rules alerts.test.yaml`, which feed series as
 * the service exports them and say when each alert fires; without promtool those two are skipped, saying so,
 * and the parser checks below still run: every rule well formed, every alert the issue asks for present and
 * unit-tested, every metric an expression reads one that docs/observability.md lists (a renamed metric
 * breaks this test, not a page at 3 a.m.).
 */
const DIR = path.join(ROOT, 'deploy/prometheus');
const PROMTOOL = process.env.PROMTOOL ?? '/usr/bin/promtool';
const noPromtool = existsSync(PROMTOOL) ? false : `promtool is not installed (apt-get install prometheus); the parser checks run alone`;

interface Rule {
  alert?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const rules = (parse(readFileSync(path.join(DIR, 'alerts.yaml'), 'utf8')) as { groups: Array<{ name: string; rules: Rule[] }> }).groups.flatMap((g) => g.rules);

t.test('promtool check rules: the file is valid', { skip: noPromtool }, async (t) => {
  const run = spawnSync(PROMTOOL, ['check', 'rules', 'alerts.yaml'], { cwd: DIR, encoding: 'utf8' });
  t.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  t.match(run.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
  // The check is a real one: a rule with a broken expression is refused.
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'gs-alerts-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  writeFileSync(path.join(scratch, 'broken.yaml'), 'groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: max(gs_db_available ==\n');
  t.not(spawnSync(PROMTOOL, ['check', 'rules', 'broken.yaml'], { cwd: scratch }).status, 0, 'a broken expression is refused');
});

t.test('promtool test rules: each alert fires when it should and not otherwise', { skip: noPromtool }, async (t) => {
  const run = spawnSync(PROMTOOL, ['test', 'rules', 'alerts.test.yaml'], { cwd: DIR, encoding: 'utf8' });
  t.equal(run.status, 0, `${run.stdout}${run.stderr}`);
});

t.test('the rules: well formed, the alerts asked for, each unit-tested', async (t) => {
  const names = rules.map((r) => r.alert);
  for (const wanted of [
    'GenerationServiceCatalogVersionSkew',
    'GenerationServiceBreakerOpen',
    'GenerationServiceWebhookBacklog',
    'GenerationServiceJobsStuck',
    'GenerationServiceDatabaseUnavailable',
  ]) {
    t.ok(names.includes(wanted), `${wanted} is there`);
  }
  const tests = readFileSync(path.join(DIR, 'alerts.test.yaml'), 'utf8');
  for (const rule of rules) {
    t.ok(rule.alert && rule.expr, 'an alert with an expression');
    t.match(rule.labels?.severity, /^(warning|critical)$/, `${rule.alert}: a severity`);
    t.ok(rule.annotations?.summary, `${rule.alert}: a summary`);
    t.match(tests, new RegExp(`alertname: ${rule.alert}\\b`), `${rule.alert}: unit-tested in alerts.test.yaml`);
  }
});

t.test('every metric the rules read is one the service exports (docs/observability.md)', async (t) => {
  const doc = readFileSync(path.join(ROOT, 'docs/observability.md'), 'utf8');
  const families = new Set([...doc.matchAll(/^\| `[a-z0-9_.]+`(?:, `\.max`)? \| `([a-z0-9_]+?)(?:_\*)?`/gm)].map((m) => m[1]!));
  t.ok(families.size > 20, `${families.size} metric families documented`);
  for (const rule of rules) {
    // Label names out first: grouping clauses and matchers.
    const selectors = rule.expr.replace(/\b(?:by|without|on|ignoring)\s*\([^)]*\)/g, ' ').replace(/\{[^}]*\}/g, ' ');
    const read = [...selectors.matchAll(/\b(gs_[a-z0-9_]+)\b/g)].map((m) => m[1]!);
    t.ok(read.length > 0, `${rule.alert} reads a metric of the service`);
    for (const series of read) {
      const family = series.replace(/_(bucket|sum|count|total)$/, '');
      t.ok(families.has(family) || families.has(series), `${rule.alert}: ${series} is documented`);
    }
  }
});

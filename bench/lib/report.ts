import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './processes.ts';
import { NOISY_BACKGROUND_CPU_PERCENT, round } from './load.ts';
import type { BenchOptions, LoadSummary, MemoryReport, ScenarioTable } from './types.ts';

export interface Machine {
  cpuModel: string;
  cpuCount: number;
  totalMemoryBytes: number;
  nodeVersion: string;
  platform: string;
  kernel: string;
  arch: string;
  /** Engine the service reports on GET /v1. */
  serviceEngine: string;
  /** Engine the raw hello-world loaded. */
  baselineEngine: string;
  database: string;
  /** 1/5/15-minute load averages when the run started: above the core count, the machine was shared. */
  loadAverageAtStart: number[];
}

export interface ScenarioReport {
  name: string;
  description: string;
  result: LoadSummary;
  baselineTitle: string;
  baselineReqPerSec: number;
  /** result req/s ÷ baseline req/s. */
  ratio: number;
  /** baseline server CPU µs/request ÷ service CPU µs/request: the req/s ratio the service would reach if the server, not the load generator, were the bottleneck. */
  cpuRatio: number | undefined;
  target: number | undefined;
  /** The ratio must stay at or below the target (a growth) instead of reaching it. */
  targetAtMost?: boolean;
  /** Ratio at or above the target (at or below it with targetAtMost) and no errors, timeouts or non-2xx answers; undefined without a target. */
  met: boolean | undefined;
  /** The service's memory minute by minute (soak scenarios). */
  memory?: MemoryReport;
  /** A table of the scenario's own, shown after the run's table. */
  table?: ScenarioTable;
  notes: string[];
}

export interface Report {
  startedAt: string;
  finishedAt: string;
  options: BenchOptions;
  machine: Machine;
  baseline: LoadSummary;
  scenarios: ScenarioReport[];
  failures: Array<{ name: string; error: string }>;
}

export function describeMachine(partial: Pick<Machine, 'serviceEngine' | 'baselineEngine' | 'database' | 'loadAverageAtStart'>): Machine {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cpuCount: cpus.length,
    totalMemoryBytes: os.totalmem(),
    nodeVersion: process.version,
    platform: os.platform(),
    kernel: os.release(),
    arch: os.arch(),
    ...partial,
  };
}

/** `memory://` → PGlite in memory; `postgres://user:secret@host/db` → PostgreSQL at host/db (no credentials). */
export function describeDatabase(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    if (url.protocol === 'memory:') return 'PGlite (in memory)';
    if (url.protocol === 'postgres:' || url.protocol === 'postgresql:') return `PostgreSQL (${url.host}${url.pathname})`;
  } catch {
    /* fall through */
  }
  return 'unknown';
}

export function machineLine(report: Report): string {
  const m = report.machine;
  const o = report.options;
  return (
    `Machine: ${m.cpuModel}, ${m.cpuCount} cores, ${round(m.totalMemoryBytes / 2 ** 30, 1)} GiB RAM, ${m.platform} ${m.kernel} (${m.arch}), Node ${m.nodeVersion}; ` +
    `service engine ${m.serviceEngine}, database ${m.database}; ` +
    `autocannon ${o.connections} connections, pipelining ${o.pipelining}, ${o.durationS} s per run after a ${o.warmupS} s warm-up; ` +
    `servers and load generator in separate processes on the same machine; load average at start ${m.loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')}; run ${report.startedAt}.`
  );
}

/** Warnings about how far the figures can be trusted. */
export function caveats(report: Report): string[] {
  const out: string[] = [];
  const b = report.baseline;
  if (b.loadGeneratorCpuPercent >= 85 && (b.serverCpuPercent ?? 100) < 85) {
    out.push(
      `The load generator was the bottleneck of the baseline (it used ${b.loadGeneratorCpuPercent}% of a core, the raw server ${b.serverCpuPercent}%): the req/s ratio can flatter the service; the CPU ratio is the sharper figure.`,
    );
  }
  const noisy = [b, ...report.scenarios.map((s) => s.result)].filter((r) => (r.backgroundCpuPercent ?? 0) > NOISY_BACKGROUND_CPU_PERCENT);
  if (noisy.length > 0) {
    out.push(
      `Other processes used the CPU during ${noisy.map((r) => `${r.title} (${r.backgroundCpuPercent}% of a core)`).join(', ')}: those figures are noisy.`,
    );
  }
  return out;
}

/** A markdown table's lines: the header, its rule (the first column left-aligned, the others right) and the rows. */
function markdownLines(header: string[], rows: string[][]): string[] {
  return [`| ${header.join(' | ')} |`, `| ${header.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`, ...rows.map((row) => `| ${row.join(' | ')} |`)];
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

export function markdownTable(report: Report): string {
  const rows: string[][] = [];
  const b = report.baseline;
  const us = (r: LoadSummary) => (r.serverCpuUsPerRequest === undefined ? '?' : fmt(r.serverCpuUsPerRequest, 1));
  rows.push([
    `baseline: raw uWS \`GET /\``,
    fmt(b.reqPerSec),
    fmt(b.latencyMs.p50),
    fmt(b.latencyMs.p99),
    '—',
    '—',
    '—',
    '—',
    `${b.errors + b.timeouts} / ${b.non2xx}`,
    us(b),
    '—',
  ]);
  for (const s of report.scenarios) {
    const r = s.result;
    rows.push([
      s.name,
      fmt(r.reqPerSec),
      fmt(r.latencyMs.p50),
      fmt(r.latencyMs.p99),
      fmt(s.baselineReqPerSec),
      s.ratio.toFixed(2),
      s.target === undefined ? '—' : `${s.targetAtMost ? '≤' : '≥'} ${s.target.toFixed(2)}`,
      s.met === undefined ? '—' : s.met ? 'yes' : '**no**',
      `${r.errors + r.timeouts} / ${r.non2xx}`,
      us(r),
      s.cpuRatio === undefined ? '?' : s.cpuRatio.toFixed(2),
    ]);
  }
  for (const f of report.failures) rows.push([f.name, 'failed', '', '', '', '', '', '**no**', f.error.split('\n')[0]!.replace(/\|/g, '\\|')]);
  const header = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'baseline req/s', 'ratio', 'target', 'met?', 'errors / non-2xx', 'server CPU µs/req', 'CPU ratio'];
  const lines = markdownLines(header, rows);
  const notes = [
    'ratio = req/s ÷ baseline req/s; CPU ratio = baseline server CPU µs/req ÷ server CPU µs/req (what the ratio would be if the server, not the load generator, were the bottleneck).',
    ...report.scenarios.flatMap((sc) => [
      ...(sc.baselineTitle !== b.title ? [`${sc.name}: baseline is ${sc.baselineTitle}.`] : []),
      ...sc.notes.map((note) => `${sc.name}: ${note}.`),
    ]),
    ...caveats(report),
  ];
  const tables = report.scenarios.flatMap((sc) => (sc.table ? [scenarioTable(sc.name, sc.table)] : []));
  return `${lines.join('\n')}\n\n${tables.join('\n')}${notes.map((n) => `- ${n}`).join('\n')}\n\n${machineLine(report)}\n`;
}

function scenarioTable(name: string, table: ScenarioTable): string {
  return [
    `${name}: ${table.title}`,
    '',
    ...markdownLines(
      table.header,
      table.rows.map((row) => row.map((cell) => cell.replace(/\|/g, '\\|'))),
    ),
    '',
    '',
  ].join('\n');
}

/** The memory tables of the run's soak scenarios, with the machine line; empty when none ran. */
export function memoryTables(report: Report): string {
  const tables = report.scenarios.filter((sc) => sc.memory).map((sc) => memoryTable(sc.name, sc.memory!));
  return tables.length === 0 ? '' : `${tables.join('\n')}\n${machineLine(report)}\n`;
}

const MiB = (bytes: number) => fmt(bytes / 2 ** 20);

/** The service's memory at the end of each minute of a soak, and the verdict. */
export function memoryTable(name: string, memory: MemoryReport): string {
  const header = [
    'minute',
    'creates (201)',
    'other answers',
    'RSS MiB',
    'heap used MiB (after GC)',
    'heap used MiB (before GC)',
    'heap total MiB',
    'external MiB',
    'arrayBuffers MiB',
    'CPU µs/create',
    'p50 / p99 ms',
  ];
  const rows = memory.minutes.map((m) => [
    `${m.minute}${m.phase === 'warm-up' ? ' (warm-up)' : ''}`,
    fmt(m.created),
    Object.entries(m.otherAnswers)
      .map(([k, v]) => `${k}: ${fmt(v)}`)
      .join(', ') || '—',
    MiB(m.rssBytes),
    MiB(m.heapUsedBytes),
    MiB(m.heapUsedBeforeGcBytes),
    MiB(m.heapTotalBytes),
    MiB(m.externalBytes),
    MiB(m.arrayBuffersBytes),
    m.cpuUsPerCreate === undefined ? '?' : fmt(m.cpuUsPerCreate),
    `${m.latencyMs.p50} / ${m.latencyMs.p99}`,
  ]);
  return [`${name}: the service process at the end of each minute`, '', ...markdownLines(header, rows), '', `- ${name}: ${memory.verdict}`, ''].join('\n');
}

export interface Written {
  json: string;
  latestJson: string;
  latestMd: string;
  readme: boolean;
}

/**
 * bench/results/<ISO timestamp>.json, latest.json, latest.md, and in bench/README.md: the table between the bench
 * markers when the run was a full one (every scenario), so a run of a few scenarios does not replace the
 * whole table with them; and the soak's memory tables between the bench:memory markers whenever it ran.
 */
export function writeReport(report: Report, full: boolean): Written {
  const dir = path.join(repoRoot, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const json = `${JSON.stringify(report, null, 2)}\n`;
  const stamped = path.join(dir, `${report.startedAt.replace(/:/g, '-')}.json`);
  const latestJson = path.join(dir, 'latest.json');
  const latestMd = path.join(dir, 'latest.md');
  const table = markdownTable(report);
  const memory = memoryTables(report);
  writeFileSync(stamped, json);
  writeFileSync(latestJson, json);
  writeFileSync(latestMd, `# Latest bench run\n\n${table}${memory ? `\n${memory}` : ''}`);
  const readme = [...(full ? [updateReadme('bench', table)] : []), ...(memory ? [updateReadme('bench:memory', memory)] : [])];
  return { json: stamped, latestJson, latestMd, readme: readme.length > 0 && readme.every(Boolean) };
}

/** Replaces what lies between `<!-- name:start -->` and `<!-- name:end -->` of bench/README.md (its dated figures); leaves it alone (and does not create it) otherwise. */
function updateReadme(name: string, content: string): boolean {
  const readme = path.join(repoRoot, 'bench', 'README.md');
  if (!existsSync(readme)) return false;
  const [START, END] = [`<!-- ${name}:start -->`, `<!-- ${name}:end -->`];
  const text = readFileSync(readme, 'utf8');
  const start = text.indexOf(START);
  const end = text.indexOf(END, start + START.length);
  if (start < 0 || end < 0) return false;
  const updated = `${text.slice(0, start + START.length)}\n${content}${text.slice(end)}`;
  if (updated !== text) writeFileSync(readme, updated);
  return true;
}

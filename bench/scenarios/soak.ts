import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { round } from '../lib/load.ts';
import { scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import { processCpuSeconds, processRssBytes, repoRoot } from '../lib/processes.ts';
import { fundedWorkspaces, steadyCreates, type CreateCounts } from '../lib/steady-creates.ts';
import type { BenchContext, ExtraServer, LoadSummary, MemoryMinute, MemoryReport, Scenario, ScenarioOutcome } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';

/** Team-plan workspaces the creates go to in turn (each runs 50 jobs at once and holds 500 unfinished). */
const WORKSPACES = 4;
/** Per-key limit of the soak's service: no run comes near it. */
const REQUESTS_PER_MINUTE = '1000000';
/** RSS growth the soak accepts: median of the second half of the measured minutes ÷ median of the first half. */
const RSS_GROWTH_TARGET = 1 + 0.05;
/** The second half of the measured minutes may add at most this share to the first half's RSS (and heap). */
const LEVEL_SHARE = 0.05;
/** ... or this much of the heap, whichever is larger: a collection leaves a few MiB either way. */
const HEAP_LEVEL_FLOOR_BYTES = 4 * 2 ** 20;
const probeModule = path.join(repoRoot, 'bench', 'lib', 'memory-probe.ts');

function envInt(name: string, fallback: number, max: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max) throw new Error(`${name}=${JSON.stringify(raw)}: expected a whole number from 1 to ${max}`);
  return Number(raw);
}

/** BENCH_SOAK_MINUTES (measured, default 10), BENCH_SOAK_WARMUP_MINUTES (default 2), BENCH_SOAK_RATE (creates/s, default 200). */
function soakOptions() {
  return {
    minutes: envInt('BENCH_SOAK_MINUTES', 10, 24 * 60),
    warmupMinutes: envInt('BENCH_SOAK_WARMUP_MINUTES', 2, 60),
    rate: envInt('BENCH_SOAK_RATE', 200, 10_000),
  };
}

const budget = () => {
  const o = soakOptions();
  return (o.minutes + o.warmupMinutes) * 60 + 180;
};

/**
 * Steady creates for BENCH_SOAK_WARMUP_MINUTES + BENCH_SOAK_MINUTES on the service as a newcomer runs it
 * (PGlite on disk under a scratch DATA_DIR), reading the service process's memory at the end of every
 * minute: RSS from /proc, the V8 heap after a full collection (and before it), external memory (PGlite's
 * WebAssembly memory) and ArrayBuffers, from a probe preloaded into the process. The figure must level
 * off after the warm-up.
 */
export const soak: Scenario = {
  name: 'soak',
  description:
    "steady POST /v1/generations with a fresh Idempotency-Key each (4 team-plan workspaces, local provider) for BENCH_SOAK_MINUTES after a warm-up, PGlite on disk; the service's RSS and heap at the end of each minute",
  extraBudgetS: budget,
  async run(ctx) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gs-soak-'));
    try {
      return await soakOn(ctx, 'PGlite on disk', { DATABASE_URL: '', DATA_DIR: dataDir }, dataDir);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  },
};

/** The same on PostgreSQL (a scratch database). */
export const soakPostgres: Scenario = {
  name: 'soak-postgres',
  description: 'soak with the service on PostgreSQL (a scratch database)',
  extraBudgetS: budget,
  async run(ctx) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gs-soak-'));
    let db: ScratchDatabase | undefined;
    try {
      db = await scratchDatabase();
      return await soakOn(ctx, 'PostgreSQL', { DATABASE_URL: db.url, DATA_DIR: dataDir }, dataDir);
    } finally {
      await db?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  },
};

async function soakOn(ctx: BenchContext, database: string, env: Record<string, string>, dataDir: string): Promise<ScenarioOutcome> {
  const options = soakOptions();
  const probeFile = path.join(dataDir, 'memory.jsonl');
  let server: ExtraServer | undefined;
  let load: ReturnType<typeof steadyCreates> | undefined;
  try {
    server = await ctx.startService(
      `service (${database}, memory probe)`,
      {
        ...env,
        RATE_LIMIT_TEAM: REQUESTS_PER_MINUTE,
        BENCH_MEMORY_PROBE_FILE: probeFile,
      },
      ['--expose-gc', '--import', probeModule],
    );
    const total = options.warmupMinutes + options.minutes;
    const credits = Math.ceil((options.rate * total * 60 * 1.2) / WORKSPACES);
    const workspaces = await fundedWorkspaces(server.url, WORKSPACES, credits);
    ctx.log(
      `soak (${database}): ${options.rate} creates/s for ${options.warmupMinutes} min of warm-up + ${options.minutes} min, ${WORKSPACES} team-plan workspaces with ${credits} credits each`,
    );

    const pid = server.pid;
    const minutes: MemoryMinute[] = [];
    load = steadyCreates(server.url, workspaces, options.rate, { idempotencyKeys: true });
    const started = performance.now();
    let cpuBefore = processCpuSeconds(pid);
    for (let minute = 1; minute <= total; minute++) {
      await sleep(started + minute * 60_000 - performance.now());
      const counts = load.take();
      const cpuAfter = processCpuSeconds(pid);
      const memory = await readMemory(pid, probeFile);
      const reading = minuteOf(
        minute,
        minute <= options.warmupMinutes ? 'warm-up' : 'measured',
        counts,
        memory,
        cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore,
      );
      cpuBefore = processCpuSeconds(pid);
      minutes.push(reading);
      ctx.log(
        `soak (${database}) minute ${minute}${reading.phase === 'warm-up' ? ' (warm-up)' : ''}: ${reading.created} created${Object.keys(reading.otherAnswers).length ? ` (other: ${JSON.stringify(reading.otherAnswers)})` : ''}, ` +
          `RSS ${mib(reading.rssBytes)} MiB, heap used ${mib(reading.heapUsedBytes)} MiB after GC (${mib(reading.heapUsedBeforeGcBytes)} before), heap total ${mib(reading.heapTotalBytes)} MiB, ` +
          `external ${mib(reading.externalBytes)} MiB, arrayBuffers ${mib(reading.arrayBuffersBytes)} MiB; ${reading.cpuUsPerCreate ?? '?'} µs CPU/create, p50 ${reading.latencyMs.p50} ms, p99 ${reading.latencyMs.p99} ms`,
      );
    }
    await load.stop();
    load = undefined;

    const memory = judge(minutes, options.warmupMinutes);
    ctx.log(`soak (${database}): ${memory.verdict}`);
    const measured = minutes.filter((m) => m.phase === 'measured');
    const warm = minutes.filter((m) => m.phase === 'warm-up');
    return {
      result: summaryOf(`service: steady creates after the warm-up (${database})`, server.url, measured),
      baseline: summaryOf(`the same creates during the warm-up (${database})`, server.url, warm),
      ratio: round(memory.rssGrowthRatio, 3),
      target: RSS_GROWTH_TARGET,
      targetAtMost: true,
      memory,
      notes: [
        `ratio = RSS growth after the ${options.warmupMinutes}-minute warm-up: median of the second half of the measured minutes ÷ median of the first half (target: at most ${RSS_GROWTH_TARGET}); the same for the heap used after a full collection: ${round(memory.heapGrowthRatio, 3)}; RSS at the end ÷ at the end of the warm-up: ${round(memory.endToWarmupRssRatio, 3)}; baseline = the same load during the warm-up (its req/s and CPU per create)`,
        `${options.rate} creates/s offered, each with a fresh Idempotency-Key, round robin over ${WORKSPACES} team-plan workspaces; local provider (LOCAL_PROVIDER_LATENCY_MS default); memory read at the end of each minute (RSS from /proc, heap from a probe after a full collection)`,
        memory.verdict,
      ],
    };
  } finally {
    await load?.stop();
    await server?.stop();
  }
}

interface ProbeLine {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  heapUsedBeforeGc: number;
  external: number;
  arrayBuffers: number;
}

/** Asks the probe for a reading (SIGUSR2) and waits for its line; RSS is read from /proc just after. */
async function readMemory(pid: number, file: string): Promise<ProbeLine & { vmRss: number }> {
  const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : []);
  const before = lines().length;
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 15_000;
  for (;;) {
    const now = lines();
    if (now.length > before) {
      const line = JSON.parse(now.at(-1)!) as ProbeLine;
      return { ...line, vmRss: processRssBytes(pid) ?? line.rss };
    }
    if (Date.now() > deadline) throw new Error('the memory probe did not answer within 15 s');
    await sleep(50);
  }
}

function minuteOf(
  minute: number,
  phase: MemoryMinute['phase'],
  counts: CreateCounts,
  memory: ProbeLine & { vmRss: number },
  cpuSeconds: number | undefined,
): MemoryMinute {
  const created = counts.byStatus['201'] ?? 0;
  const otherAnswers: Record<string, number> = {};
  for (const [status, n] of Object.entries(counts.byStatus)) if (status !== '201') otherAnswers[status] = n;
  if (counts.errors > 0) otherAnswers.errors = counts.errors;
  if (counts.heldBack > 0) otherAnswers['held back (ticks)'] = counts.heldBack;
  const sorted = [...counts.latenciesMs].sort((a, b) => a - b);
  const at = (p: number) => round(sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0, 1);
  return {
    minute,
    phase,
    rssBytes: memory.vmRss,
    heapUsedBytes: memory.heapUsed,
    heapUsedBeforeGcBytes: memory.heapUsedBeforeGc,
    heapTotalBytes: memory.heapTotal,
    externalBytes: memory.external,
    arrayBuffersBytes: memory.arrayBuffers,
    created,
    otherAnswers,
    cpuUsPerCreate: cpuSeconds === undefined || created === 0 ? undefined : Math.round((cpuSeconds * 1e6) / created),
    latencyMs: { p50: at(0.5), p99: at(0.99) },
  };
}

/**
 * Did memory level off? The measured minutes are cut in two halves, and the median reading of the second
 * may exceed that of the first by at most LEVEL_SHARE of it, for RSS and for the heap in use after a
 * collection (a leak keeps adding at the same pace in both halves; a single RSS reading moves by tens of
 * MiB with the size of V8's young generation, so medians, not end points, are compared).
 */
export function judge(minutes: MemoryMinute[], warmupMinutes: number): MemoryReport {
  const reference = minutes[warmupMinutes - 1] ?? minutes[0]!;
  const measured = minutes.slice(warmupMinutes);
  const half = Math.floor(measured.length / 2);
  const first = measured.slice(0, Math.max(1, half));
  const second = measured.slice(half);
  const end = measured.at(-1) ?? reference;
  const rss = [median(first.map((m) => m.rssBytes)), median(second.map((m) => m.rssBytes))] as const;
  const heap = [median(first.map((m) => m.heapUsedBytes)), median(second.map((m) => m.heapUsedBytes))] as const;
  const rssLevel = rss[1] - rss[0] <= LEVEL_SHARE * rss[0];
  const heapLevel = heap[1] - heap[0] <= Math.max(LEVEL_SHARE * heap[0], HEAP_LEVEL_FLOOR_BYTES);
  const levelledOff = rssLevel && heapLevel;
  const range = (values: number[]) => `${mib(Math.min(...values))}-${mib(Math.max(...values))}`;
  const verdict =
    `${levelledOff ? 'levelled off' : 'did NOT level off'} after the warm-up: RSS median ${mib(rss[0])} MiB over minutes ${first[0]?.minute}-${first.at(-1)?.minute} and ${mib(rss[1])} MiB over minutes ${second[0]?.minute}-${second.at(-1)?.minute} ` +
    `(${signedMib(rss[1] - rss[0])} MiB; readings ${range(measured.map((m) => m.rssBytes))} MiB; ${mib(reference.rssBytes)} at the end of the warm-up, ${mib(end.rssBytes)} at the end); ` +
    `heap used after GC ${mib(heap[0])} → ${mib(heap[1])} MiB (${signedMib(heap[1] - heap[0])}); external ${mib(reference.externalBytes)} → ${mib(end.externalBytes)} MiB`;
  return {
    warmupMinutes,
    minutes,
    rssGrowthRatio: rss[1] / rss[0],
    endToWarmupRssRatio: end.rssBytes / reference.rssBytes,
    heapGrowthRatio: heap[1] / heap[0],
    levelledOff,
    verdict,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function summaryOf(title: string, url: string, minutes: MemoryMinute[]): LoadSummary {
  const created = minutes.reduce((sum, m) => sum + m.created, 0);
  const other = minutes.reduce(
    (sum, m) =>
      sum +
      Object.entries(m.otherAnswers)
        .filter(([k]) => /^\d+$/.test(k))
        .reduce((s, [, v]) => s + v, 0),
    0,
  );
  const errors = minutes.reduce((sum, m) => sum + (m.otherAnswers.errors ?? 0), 0);
  const cpu = minutes.filter((m) => m.cpuUsPerCreate !== undefined);
  const cpuUs = cpu.length === minutes.length && created > 0 ? cpu.reduce((sum, m) => sum + m.cpuUsPerCreate! * m.created, 0) / created : undefined;
  const seconds = minutes.length * 60;
  return {
    ...measuredSummary({
      title,
      url: `${url}/v1/generations`,
      method: 'POST',
      connections: 64,
      durationS: seconds,
      reqPerSec: round(created / Math.max(1, seconds), 1),
      totalRequests: created + other,
      // Latency per minute is in the memory table; here the worst minute's p50 and p99.
      latencyMs: {
        mean: 0,
        p50: Math.max(0, ...minutes.map((m) => m.latencyMs.p50)),
        p90: 0,
        p99: Math.max(0, ...minutes.map((m) => m.latencyMs.p99)),
        max: 0,
      },
      errors,
      serverCpuUsPerRequest: cpuUs === undefined ? undefined : round(cpuUs, 2),
      serverCpuPercent: cpuUs === undefined ? undefined : round(((cpuUs * created) / 1e6 / seconds) * 100, 1),
    }),
    non2xx: other,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
const signedMib = (bytes: number) => `${bytes >= 0 ? '+' : '−'}${Math.abs(mib(bytes))}`;

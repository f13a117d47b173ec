// `npm run bench [scenario…]`: raw uWS hello-world baseline vs the service, each in its own process,
// loaded by autocannon from this process. See bench/README.md.
import os from 'node:os';
import { NOISY_BACKGROUND_CPU_PERCENT, runAutocannon, stopCurrentLoad } from './lib/load.ts';
import { freePort, killAllNow, startNodeServer, stopAll, tail, waitUntilReady, type ChildServer } from './lib/processes.ts';
import { describeDatabase, describeMachine, markdownTable, memoryTables, writeReport, type Report, type ScenarioReport } from './lib/report.ts';
import { stopServer } from './lib/processes.ts';
import type { BenchContext, BenchOptions, ExtraServer, LoadRequest, LoadSummary } from './lib/types.ts';
import { scenarios as allScenarios } from './scenarios/index.ts';

const READY_TIMEOUT_MS = 90_000;

function log(message: string): void {
  process.stdout.write(`[bench] ${message}\n`);
}

function positiveInt(name: string, fallback: number, max: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max) {
    throw new UsageError(`${name}=${JSON.stringify(raw)}: expected a whole number from 1 to ${max}`);
  }
  return Number(raw);
}

function nonNegativeInt(name: string, fallback: number, max: number): number {
  const raw = process.env[name]?.trim();
  if (raw === '0') return 0;
  return positiveInt(name, fallback, max);
}

class UsageError extends Error {}

function readOptions(): BenchOptions {
  return {
    durationS: positiveInt('BENCH_DURATION_S', 10, 600),
    connections: positiveInt('BENCH_CONNECTIONS', 100, 10_000),
    pipelining: positiveInt('BENCH_PIPELINING', 1, 100),
    warmupS: positiveInt('BENCH_WARMUP_S', 2, 60),
    noisyRetries: nonNegativeInt('BENCH_NOISY_RETRIES', 1, 5),
  };
}

function selectScenarios(names: string[]) {
  if (names.length === 0) return allScenarios;
  const known = new Map(allScenarios.map((s) => [s.name, s]));
  const unknown = names.filter((n) => !known.has(n));
  if (unknown.length > 0) {
    throw new UsageError(`unknown scenario(s): ${unknown.join(', ')}; known: ${[...known.keys()].join(', ')}`);
  }
  return names.map((n) => known.get(n)!);
}

/** Everything the harness must undo, whatever way it ends. */
let cleaningUp: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaningUp ??= (async () => {
    stopCurrentLoad();
    await stopAll();
  })();
  return cleaningUp;
}

function installExitGuards(budgetS: number): void {
  process.on('exit', killAllNow);
  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping the servers`);
    setTimeout(() => process.exit(130), 10_000).unref();
    cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('SIGHUP', onSignal);
  const watchdog = setTimeout(() => {
    log(`gave up after ${budgetS} s (BENCH_TIMEOUT_S): stopping the servers`);
    setTimeout(() => process.exit(124), 10_000).unref();
    cleanup().finally(() => process.exit(124));
  }, budgetS * 1000);
  watchdog.unref();
}

async function main(): Promise<number> {
  const options = readOptions();
  const { noisyRetries } = options;
  const selected = selectScenarios(process.argv.slice(2).filter((a) => a !== '--'));
  const perRunS = options.warmupS + (1 + options.noisyRetries) * options.durationS + 15;
  const extraS = selected.reduce((sum, s) => sum + (s.extraBudgetS?.() ?? 0), 0);
  const budgetS = positiveInt('BENCH_TIMEOUT_S', 120 + perRunS + selected.reduce((sum, s) => sum + (s.budgetS ?? 3 * perRunS), 0) + extraS, 86_400);
  installExitGuards(budgetS);

  const databaseUrl = process.env.BENCH_DATABASE_URL?.trim() || 'memory://';
  const startedAt = new Date().toISOString();
  const loadAverageAtStart = os.loadavg().map((l) => Math.round(l * 100) / 100);
  log(
    `${selected.length} scenario(s): ${selected.map((s) => s.name).join(', ')}; ${options.connections} connections, pipelining ${options.pipelining}, ${options.warmupS} s warm-up + ${options.durationS} s per run; database ${describeDatabase(databaseUrl)}; load average ${loadAverageAtStart.join(' ')} on ${os.cpus().length} cores`,
  );

  const [basePort, servicePort] = [await freePort(), await freePort()];
  const baselineServer = startNodeServer('raw uWS hello-world', 'bench/servers/hello-uws.ts', basePort, {});
  const serviceEnv = {
    LOG_LEVEL: 'warn',
    DATABASE_URL: databaseUrl,
    // Keep a developer's OTLP settings from turning on tracing export for the bench.
    OTEL_TRACES_EXPORTER: 'none',
    // Metrics on, as by default, on a free port of each process's own (several service processes run at once).
    METRICS_PORT: '0',
    // The webhook-delivery scenario's receiver is on loopback; its first deliveries are held up to a minute.
    ALLOW_PRIVATE_EGRESS: 'true',
    WEBHOOK_TIMEOUT_MS: '60000',
  };
  const service = startNodeServer('service', 'app/main.ts', servicePort, serviceEnv);
  await Promise.all([waitUntilReady(baselineServer, '/', READY_TIMEOUT_MS), waitUntilReady(service, '/health/ready', READY_TIMEOUT_MS)]);
  const identity = (await (await fetch(`${service.url}/v1`)).json()) as { engine?: string; version?: string };
  const baselineEngine = baselineServer.output.map(parseReady).find((r) => r?.engine)?.engine ?? 'unknown';
  log(
    `servers ready: baseline ${baselineServer.url} (pid ${baselineServer.pid}, ${baselineEngine}), service ${service.url} (pid ${service.pid}, ${identity.engine ?? 'unknown engine'})`,
  );
  if (identity.engine !== 'uws-native') log('warning: the service does not run on the native uWS addon; figures are not representative');

  const extraByPid = new Map<number, ChildServer>();
  const startService = async (name: string, env: Record<string, string>, nodeArgs: string[] = []): Promise<ExtraServer> => {
    const server = startNodeServer(name, 'app/main.ts', await freePort(), { ...serviceEnv, ...env }, nodeArgs);
    await waitUntilReady(server, '/health/ready', READY_TIMEOUT_MS);
    log(`${name} ready: ${server.url} (pid ${server.pid})`);
    extraByPid.set(server.pid, server);
    return { name, url: server.url, pid: server.pid, stop: () => stopServer(server), allocatedBytes: server.allocatedBytes };
  };

  const load = async (request: LoadRequest): Promise<LoadSummary> => {
    const extra = request.server && extraByPid.get(request.server.pid);
    if (request.server && !extra) throw new Error(`${request.server.name} was not started by ctx.startService`);
    const server: ChildServer = extra ?? (request.target === 'baseline' ? baselineServer : service);
    const method = request.method ?? 'GET';
    const title = request.title ?? `${request.target === 'baseline' ? 'baseline' : 'service'} ${method} ${request.path}`;
    const common = {
      url: `${server.url}${request.path}`,
      method,
      headers: request.headers,
      body: request.body,
      connections: request.connections ?? options.connections,
      pipelining: request.pipelining ?? options.pipelining,
      serverPid: server.pid,
      variants: request.variants,
    };
    if (!request.skipWarmup) {
      log(`${title}: ${options.warmupS} s warm-up (discarded)`);
      await runAutocannon({ ...common, title: `${title} (warm-up)`, durationS: options.warmupS });
    }
    const durationS = request.durationS ?? options.durationS;
    // The machine may be shared: a run during which other processes used the CPU is repeated
    // (BENCH_NOISY_RETRIES times at most) and the quietest attempt is kept.
    let best: LoadSummary | undefined;
    for (let attempt = 0; attempt <= noisyRetries; attempt++) {
      log(`${title}: measuring for ${durationS} s${attempt > 0 ? ` (attempt ${attempt + 1}: the previous one was noisy)` : ''}`);
      const summary = await runAutocannon({ ...common, title, durationS });
      if (server.hasExited()) throw new Error(`${server.name} exited during the run:\n${tail(server)}`);
      log(`${title}: ${fmtSummary(summary)}`);
      if (!best || (summary.backgroundCpuPercent ?? 0) < (best.backgroundCpuPercent ?? 0)) best = summary;
      if ((best.backgroundCpuPercent ?? 0) <= NOISY_BACKGROUND_CPU_PERCENT) break;
    }
    return best!;
  };

  const baseline = await load({ target: 'baseline', path: '/', title: 'raw uWS GET /' });
  const ctx: BenchContext = { serviceUrl: service.url, servicePid: service.pid, baselineUrl: baselineServer.url, baseline, options, startService, load, log };

  const reports: ScenarioReport[] = [];
  const failures: Report['failures'] = [];
  for (const scenario of selected) {
    log(`scenario ${scenario.name}: ${scenario.description}`);
    try {
      const outcome = await scenario.run(ctx);
      const against = outcome.baseline ?? baseline;
      const ratio = outcome.ratio ?? (against.reqPerSec > 0 ? outcome.result.reqPerSec / against.reqPerSec : 0);
      const cpuRatio =
        against.serverCpuUsPerRequest && outcome.result.serverCpuUsPerRequest
          ? Math.round((against.serverCpuUsPerRequest / outcome.result.serverCpuUsPerRequest) * 1000) / 1000
          : undefined;
      const clean = outcome.result.errors === 0 && outcome.result.timeouts === 0 && outcome.result.non2xx === 0;
      reports.push({
        name: scenario.name,
        description: scenario.description,
        result: outcome.result,
        baselineTitle: against.title,
        baselineReqPerSec: against.reqPerSec,
        ratio: Math.round(ratio * 1000) / 1000,
        cpuRatio,
        target: outcome.target,
        targetAtMost: outcome.targetAtMost,
        met: outcome.target === undefined ? undefined : clean && (outcome.targetAtMost ? ratio <= outcome.target : ratio >= outcome.target),
        memory: outcome.memory,
        table: outcome.table,
        notes: [
          ...(outcome.notes ?? []),
          ...(clean ? [] : [`not a clean run: ${outcome.result.errors} errors, ${outcome.result.timeouts} timeouts, ${outcome.result.non2xx} non-2xx`]),
        ],
      });
    } catch (error) {
      log(`scenario ${scenario.name} failed: ${(error as Error).stack ?? String(error)}`);
      failures.push({ name: scenario.name, error: (error as Error).message });
      if (service.hasExited()) break;
    }
  }

  const report: Report = {
    startedAt,
    finishedAt: new Date().toISOString(),
    options,
    machine: describeMachine({ serviceEngine: identity.engine ?? 'unknown', baselineEngine, database: describeDatabase(databaseUrl), loadAverageAtStart }),
    baseline,
    scenarios: reports,
    failures,
  };
  await cleanup();

  const full = selected.length === allScenarios.length;
  const written = writeReport(report, full);
  const memory = memoryTables(report);
  process.stdout.write(`\n${markdownTable(report)}\n${memory ? `${memory}\n` : ''}`);
  for (const s of reports) {
    if (s.target === undefined) continue;
    const verdict = s.met ? 'target met' : 'target NOT met';
    process.stdout.write(
      `${s.name}: ratio ${s.ratio.toFixed(2)} (target ${s.targetAtMost ? '≤' : '≥'} ${s.target.toFixed(2)}): ${verdict}; CPU ratio ${s.cpuRatio?.toFixed(2) ?? '?'}${s.notes.length ? ` (${s.notes.join('; ')})` : ''}\n`,
    );
  }
  log(
    `results: ${written.json}, ${written.latestJson}, ${written.latestMd}${written.readme ? ', bench/README.md' : full || memory ? ' (bench/README.md lacks the bench markers: not updated)' : ' (bench/README.md: its table is that of a full run, not updated)'}`,
  );
  return failures.length > 0 ? 1 : 0;
}

function parseReady(line: string): { engine?: string } | undefined {
  try {
    return JSON.parse(line) as { engine?: string };
  } catch {
    return undefined;
  }
}

function fmtSummary(s: LoadSummary): string {
  return (
    `${Math.round(s.reqPerSec)} req/s, p50 ${s.latencyMs.p50} ms, p99 ${s.latencyMs.p99} ms, ` +
    `${s.errors} errors, ${s.timeouts} timeouts, ${s.non2xx} non-2xx, ` +
    `CPU (% of a core): server ${s.serverCpuPercent ?? '?'}, load generator ${s.loadGeneratorCpuPercent}, other processes ${s.backgroundCpuPercent ?? '?'}; ` +
    `server ${s.serverCpuUsPerRequest ?? '?'} µs CPU/request`
  );
}

main().then(
  async (code) => {
    await cleanup();
    process.exit(code);
  },
  async (error: unknown) => {
    process.stderr.write(`[bench] ${error instanceof UsageError ? error.message : ((error as Error).stack ?? String(error))}\n`);
    await cleanup();
    process.exit(error instanceof UsageError ? 2 : 1);
  },
);

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fundedWorkspaces } from '../lib/steady-creates.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario, ScenarioOutcome } from '../lib/types.ts';

/**
 * Off: neither metrics nor trace export; each variant turns one on. `tracing`: every span made, batched and
 * handed to an exporter that drops it (the tracing cost on the request path); `tracing-export`: the same spans
 * serialised and posted by OTLP to a sink that discards them (what a collector that keeps up costs as well).
 */
type Variant = 'off' | 'metrics' | 'tracing' | 'tracing-export';

/** Preloaded into the `tracing` variant's process: the OTLP exporter the service configures drops what it is given. */
const NOOP_EXPORT = ['--import', './bench/servers/noop-trace-export.ts'];

/** Workspaces the creates go to in turn (a workspace holds 500 unfinished jobs at most). */
const CREATE_WORKSPACES = 8;

/**
 * An OTLP/HTTP receiver that answers 200 to every export and keeps nothing: trace export on, at the cost
 * of the service's side only (spans made, batched, serialised and posted), as with a collector that keeps up.
 */
async function otlpSink(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function envOf(variant: Variant, sinkUrl: string): Record<string, string> {
  const env: Record<string, string> = {
    OTEL_METRICS_EXPORTER: variant === 'metrics' ? 'prometheus' : 'none',
    RATE_LIMIT_TEAM: '1000000',
    LOCAL_PROVIDER_LATENCY_MS: '0',
  };
  if (variant === 'tracing' || variant === 'tracing-export') Object.assign(env, { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl });
  return env;
}

const LABELS: Record<Variant, string> = {
  off: 'metrics and tracing off',
  metrics: 'metrics on (Prometheus endpoint)',
  tracing: 'tracing on (spans to a no-op exporter)',
  'tracing-export': 'tracing on (OTLP export to a sink)',
};

/** Measured pairs (off, then on) per scenario; each variant's best run is kept (noise from other processes only lowers a run). */
const ROUNDS = 3;

/**
 * One workload on a service with everything off and on one with `variant` on, both started first and then
 * loaded in turn (off, on, off, on…), so that the load other processes put on a shared machine falls on both alike.
 */
async function compare(ctx: BenchContext, variant: Exclude<Variant, 'off'>, workload: 'identity' | 'create'): Promise<ScenarioOutcome> {
  const sink = await otlpSink();
  const servers: ExtraServer[] = [];
  try {
    const start = async (which: Variant) => {
      const server = await ctx.startService(
        `service (${which === 'off' ? 'metrics and trace export off' : `${which} on`})`,
        envOf(which, sink.url),
        which === 'tracing' ? NOOP_EXPORT : [],
      );
      servers.push(server);
      const label = LABELS[which];
      const workspaces = workload === 'create' ? await fundedWorkspaces(server.url, CREATE_WORKSPACES, 1_000_000) : [];
      return { server, label, workspaces };
    };
    const off = await start('off');
    const on = await start(variant);
    const measure = (run: typeof off, round: number): Promise<LoadSummary> => {
      const title = `${workload === 'identity' ? 'GET /v1' : 'POST /v1/generations (text job, run at once)'}, ${run.label}, round ${round + 1}`;
      if (workload === 'identity') return ctx.load({ server: run.server, path: '/v1', title, skipWarmup: round > 0 });
      return ctx.load({
        server: run.server,
        path: '/v1/generations',
        method: 'POST',
        title,
        skipWarmup: round > 0,
        variants: run.workspaces.map((w) => ({ headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' }, body: w.body })),
      });
    };
    const runs: { off: LoadSummary[]; on: LoadSummary[] } = { off: [], on: [] };
    for (let round = 0; round < ROUNDS; round++) {
      runs.off.push(await measure(off, round));
      runs.on.push(await measure(on, round));
    }
    const best = (list: LoadSummary[]) => list.reduce((a, b) => (b.reqPerSec > a.reqPerSec ? b : a));
    const [bestOff, bestOn] = [best(runs.off), best(runs.on)];
    const cost = bestOff.reqPerSec > 0 ? 1 - bestOn.reqPerSec / bestOff.reqPerSec : 0;
    const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
    const cpuOff = median(runs.off.map((r) => r.serverCpuUsPerRequest ?? NaN));
    const cpuOn = median(runs.on.map((r) => r.serverCpuUsPerRequest ?? NaN));
    const non2xx = [...runs.off, ...runs.on].reduce((sum, r) => sum + r.non2xx, 0);
    return {
      result: bestOn,
      baseline: bestOff,
      target: variant === 'metrics' ? 0.95 : variant === 'tracing' ? 0.85 : undefined,
      notes: [
        `${variant} costs ${(cost * 100).toFixed(1)} % of the throughput (best of ${ROUNDS} interleaved runs each: ${bestOff.reqPerSec} → ${bestOn.reqPerSec} req/s; all runs off ${runs.off.map((r) => r.reqPerSec).join(', ')}, on ${runs.on.map((r) => r.reqPerSec).join(', ')})`,
        `server CPU per request, median of the runs: ${cpuOff} µs off, ${cpuOn} µs on (+${(cpuOn - cpuOff).toFixed(2)} µs)`,
        ...(non2xx > 0 ? [`non-2xx answers in these runs: ${non2xx}`] : []),
      ],
    };
  } finally {
    for (const server of servers) await server.stop();
    await sink.close();
  }
}

export const metricsCostIdentity: Scenario = {
  name: 'cost-metrics-get',
  description: 'GET /v1 with metrics on (OTEL_METRICS_EXPORTER=prometheus, the default) vs off, same run; target: at most 5 % fewer req/s',
  run: (ctx) => compare(ctx, 'metrics', 'identity'),
};

export const tracingCostIdentity: Scenario = {
  name: 'cost-tracing-get',
  description: 'GET /v1 with tracing on (every request a recorded span, handed to a no-op exporter) vs off, same run; target: at most 15 % fewer req/s',
  run: (ctx) => compare(ctx, 'tracing', 'identity'),
};

export const tracingExportCostIdentity: Scenario = {
  name: 'cost-tracing-export-get',
  description: 'GET /v1 with tracing on and its spans exported (OTLP/protobuf to a sink that discards) vs off, same run; reported, no target',
  run: (ctx) => compare(ctx, 'tracing-export', 'identity'),
};

export const metricsCostCreate: Scenario = {
  name: 'cost-metrics-create',
  description: 'POST /v1/generations (Bearer key, text job run at once, 8 team workspaces) with metrics on vs off, same run',
  run: (ctx) => compare(ctx, 'metrics', 'create'),
};

export const tracingCostCreate: Scenario = {
  name: 'cost-tracing-create',
  description: 'POST /v1/generations (Bearer key, text job run at once, 8 team workspaces) with tracing on (no-op exporter) vs off, same run',
  run: (ctx) => compare(ctx, 'tracing', 'create'),
};

export const tracingExportCostCreate: Scenario = {
  name: 'cost-tracing-export-create',
  description: 'POST /v1/generations (Bearer key, text job run at once, 8 team workspaces) with tracing on and exported (OTLP to a sink) vs off, same run',
  run: (ctx) => compare(ctx, 'tracing-export', 'create'),
};

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fundedWorkspaces } from '../lib/steady-creates.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario, ScenarioOutcome } from '../lib/types.ts';

/** Off: neither metrics nor trace export; each variant turns one on. */
type Variant = 'off' | 'metrics' | 'tracing';

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
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

function envOf(variant: Variant, sinkUrl: string): Record<string, string> {
  const env: Record<string, string> = { OTEL_METRICS_EXPORTER: variant === 'metrics' ? 'prometheus' : 'none', RATE_LIMIT_TEAM: '1000000', LOCAL_PROVIDER_LATENCY_MS: '0' };
  if (variant === 'tracing') Object.assign(env, { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl });
  return env;
}

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
      const server = await ctx.startService(`service (${which === 'off' ? 'metrics and trace export off' : `${which} on`})`, envOf(which, sink.url));
      servers.push(server);
      const label = which === 'off' ? 'metrics and tracing off' : which === 'metrics' ? 'metrics on (Prometheus endpoint)' : 'tracing on (OTLP export to a sink)';
      const workspaces = workload === 'create' ? await fundedWorkspaces(server.url, CREATE_WORKSPACES, 1_000_000) : [];
      return { server, label, workspaces };
    };
    const off = await start('off');
    const on = await start(variant);
    const measure = (run: typeof off, round: number): Promise<LoadSummary> => {
      const title = `${workload === 'identity' ? 'GET /v1' : 'POST /v1/generations (text job, run at once)'}, ${run.label}, round ${round + 1}`;
      if (workload === 'identity') return ctx.load({ server: run.server, path: '/v1', title, skipWarmup: round > 0 });
      return ctx.load({
        server: run.server, path: '/v1/generations', method: 'POST', title, skipWarmup: round > 0,
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
      target: variant === 'metrics' ? 0.95 : 0.85,
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
  description: 'GET /v1 with tracing on (OTLP export to a sink that discards) vs off, same run; target: at most 15 % fewer req/s',
  run: (ctx) => compare(ctx, 'tracing', 'identity'),
};

export const metricsCostCreate: Scenario = {
  name: 'cost-metrics-create',
  description: 'POST /v1/generations (Bearer key, text job run at once, 8 team workspaces) with metrics on vs off, same run',
  run: (ctx) => compare(ctx, 'metrics', 'create'),
};

export const tracingCostCreate: Scenario = {
  name: 'cost-tracing-create',
  description: 'POST /v1/generations (Bearer key, text job run at once, 8 team workspaces) with tracing on (OTLP to a sink) vs off, same run',
  run: (ctx) => compare(ctx, 'tracing', 'create'),
};

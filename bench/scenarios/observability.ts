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

/** One workload on a service with everything off and on one with `variant` on, one after the other in this run. */
async function compare(ctx: BenchContext, variant: Exclude<Variant, 'off'>, workload: 'identity' | 'create'): Promise<ScenarioOutcome> {
  const sink = await otlpSink();
  const measure = async (which: Variant): Promise<LoadSummary> => {
    const server: ExtraServer = await ctx.startService(`service (${which === 'off' ? 'metrics and trace export off' : `${which} on`})`, envOf(which, sink.url));
    try {
      const label = which === 'off' ? 'metrics and tracing off' : which === 'metrics' ? 'metrics on (Prometheus endpoint)' : 'tracing on (OTLP export to a sink)';
      if (workload === 'identity') return await ctx.load({ server, path: '/v1', title: `GET /v1, ${label}` });
      const workspaces = await fundedWorkspaces(server.url, CREATE_WORKSPACES, 1_000_000);
      return await ctx.load({
        server, path: '/v1/generations', method: 'POST', title: `POST /v1/generations (text job, run at once), ${label}`,
        variants: workspaces.map((w) => ({ headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' }, body: w.body })),
      });
    } finally {
      await server.stop();
    }
  };
  try {
    const off = await measure('off');
    const on = await measure(variant);
    const cost = off.reqPerSec > 0 ? 1 - on.reqPerSec / off.reqPerSec : 0;
    const cpu = off.serverCpuUsPerRequest && on.serverCpuUsPerRequest ? ` ; server CPU per request ${off.serverCpuUsPerRequest} µs off, ${on.serverCpuUsPerRequest} µs on` : '';
    return {
      result: on,
      baseline: off,
      target: variant === 'metrics' ? 0.95 : 0.85,
      notes: [
        `${variant} costs ${(cost * 100).toFixed(1)} % of the throughput (${off.reqPerSec} → ${on.reqPerSec} req/s)${cpu}`,
        ...(on.non2xx + off.non2xx > 0 ? [`non-2xx answers: ${off.non2xx} off, ${on.non2xx} on (${JSON.stringify(on.statusCodes)})`] : []),
      ],
    };
  } finally {
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

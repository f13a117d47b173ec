import autocannon from 'autocannon';
import { processCpuSeconds, systemBusyCpuSeconds } from './processes.ts';
import type { LoadSummary } from './types.ts';

export interface LoadRun {
  url: string;
  title: string;
  method: string;
  headers?: Record<string, string>;
  body?: string;
  connections: number;
  pipelining: number;
  durationS: number;
  /** pid of the server process, to measure the CPU it uses during the run. */
  serverPid: number;
  /** Headers (added to `headers`) and body of each request in turn. */
  variants?: Array<{ headers?: Record<string, string>; body?: string }>;
}

/** Above this, in % of one core, other processes competed for the CPU during a run: its figures are suspect. */
export const NOISY_BACKGROUND_CPU_PERCENT = 20;

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
let current: autocannon.Instance | undefined;

/** Stops a run in progress (on SIGINT), so the harness can clean up at once. */
export function stopCurrentLoad(): void {
  current?.stop();
}

/** One autocannon run, reduced to a LoadSummary. Refuses any target that is not loopback. */
export async function runAutocannon(run: LoadRun): Promise<LoadSummary> {
  const { hostname } = new URL(run.url);
  if (!LOOPBACK.has(hostname)) throw new Error(`bench only loads loopback addresses, not ${hostname}`);

  const cpuBefore = processCpuSeconds(run.serverPid);
  const systemBefore = systemBusyCpuSeconds();
  const ownBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  current = autocannon({
    url: run.url,
    title: run.title,
    method: run.method,
    headers: run.headers,
    body: run.body,
    connections: run.connections,
    pipelining: run.pipelining,
    duration: run.durationS,
    timeout: 10,
    ...(run.variants && run.variants.length > 0 ? { requests: [variantRequest(run)] } : {}),
  });
  let result: autocannon.Result;
  try {
    result = await current;
  } finally {
    current = undefined;
  }
  const wallS = Number(process.hrtime.bigint() - started) / 1e9;
  const own = process.cpuUsage(ownBefore);
  const cpuAfter = processCpuSeconds(run.serverPid);
  const systemAfter = systemBusyCpuSeconds();
  const serverCpuS = cpuBefore !== undefined && cpuAfter !== undefined ? cpuAfter - cpuBefore : undefined;
  const ownCpuS = (own.user + own.system) / 1e6;
  const backgroundCpuS =
    serverCpuS !== undefined && systemBefore !== undefined && systemAfter !== undefined
      ? Math.max(0, systemAfter - systemBefore - serverCpuS - ownCpuS)
      : undefined;

  const statusCodes: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stat.count;
  return {
    title: run.title,
    url: run.url,
    method: run.method,
    connections: run.connections,
    pipelining: run.pipelining,
    durationS: result.duration,
    reqPerSec: round(result.requests.average, 1),
    totalRequests: result.requests.total,
    latencyMs: {
      mean: round(result.latency.mean, 3),
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
    },
    throughputBytesPerSec: Math.round(result.throughput.average),
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCodes,
    serverCpuPercent: serverCpuS === undefined ? undefined : round((serverCpuS / wallS) * 100, 1),
    serverCpuUsPerRequest: serverCpuS === undefined || result.requests.total === 0 ? undefined : round((serverCpuS * 1e6) / result.requests.total, 2),
    loadGeneratorCpuPercent: round((ownCpuS / wallS) * 100, 1),
    backgroundCpuPercent: backgroundCpuS === undefined ? undefined : round((backgroundCpuS / wallS) * 100, 1),
  };
}

/** One autocannon request whose headers and body cycle through run.variants. */
function variantRequest(run: LoadRun): NonNullable<autocannon.Options['requests']>[number] {
  const variants = run.variants!;
  let next = 0;
  return {
    method: run.method,
    setupRequest(request) {
      const variant = variants[next++ % variants.length]!;
      return { ...request, headers: { ...request.headers, ...run.headers, ...variant.headers }, body: variant.body ?? run.body };
    },
  };
}

export function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

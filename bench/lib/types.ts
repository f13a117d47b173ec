/** What one autocannon run measured, reduced to the figures the bench reports. */
export interface LoadSummary {
  title: string;
  url: string;
  method: string;
  connections: number;
  pipelining: number;
  durationS: number;
  /** Mean of the per-second request counts (autocannon's requests.average). */
  reqPerSec: number;
  totalRequests: number;
  latencyMs: { mean: number; p50: number; p90: number; p99: number; max: number };
  throughputBytesPerSec: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodes: Record<string, number>;
  /** CPU used by the server under load, in % of one core (undefined where /proc is missing). */
  serverCpuPercent: number | undefined;
  /**
   * Server CPU time per answered request, in microseconds: the efficiency figure. Unlike req/s it does not
   * depend on whether the load generator or the server was the bottleneck.
   */
  serverCpuUsPerRequest: number | undefined;
  /** CPU used by this (load generator) process during the run, in % of one core. */
  loadGeneratorCpuPercent: number;
  /** CPU used by every other process on the machine during the run, in % of one core (noise). */
  backgroundCpuPercent: number | undefined;
}

export interface LoadRequest {
  /** Path and query on the target, e.g. `/v1`. */
  path: string;
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
  body?: string;
  title?: string;
  /** Defaults to the service; `'baseline'` loads the raw uWS hello-world. */
  target?: 'service' | 'baseline';
  /** Another server to load instead (one from ctx.startService); overrides `target`. */
  server?: ExtraServer;
  /** Requests take these headers (added to `headers`) and body in turn, round robin across connections. */
  variants?: Array<{ headers?: Record<string, string>; body?: string }>;
  /** Overrides of the run's defaults, for scenarios that need them. */
  connections?: number;
  pipelining?: number;
  durationS?: number;
  /** Skip the discarded warm-up run (default: warm up). */
  skipWarmup?: boolean;
}

export interface BenchOptions {
  connections: number;
  pipelining: number;
  durationS: number;
  warmupS: number;
  /** How many times a measured run is repeated when other processes used the CPU during it. */
  noisyRetries: number;
}

/** A service process a scenario started for itself (ctx.startService), e.g. with other settings. */
export interface ExtraServer {
  name: string;
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  pid: number;
  /** SIGTERM and wait (SIGKILL after a grace period); also done for every server when the run ends. */
  stop(): Promise<void>;
  /** Bytes its V8 heap allocated so far, when it runs with `--trace-gc` (bench/lib/gc-trace.ts). */
  allocatedBytes(): number | undefined;
}

export interface BenchContext {
  /** Base URL of the service under test, e.g. http://127.0.0.1:41234 (no trailing slash). */
  serviceUrl: string;
  /** Its process id (for readings of the CPU it uses). */
  servicePid: number;
  /** Base URL of the raw uWS hello-world. */
  baselineUrl: string;
  /** The hello-world baseline, measured once per run: `GET /` on raw uWS. */
  baseline: LoadSummary;
  options: BenchOptions;
  /**
   * Starts another service process (app/main.ts, like the one at serviceUrl: LOG_LEVEL=warn, no trace
   * export, the run's database unless env says otherwise) with `env` on top; resolves once /health/ready
   * answers 200. `nodeArgs` go to node before the script (e.g. `--expose-gc`).
   */
  startService(name: string, env: Record<string, string>, nodeArgs?: string[]): Promise<ExtraServer>;
  /** Runs autocannon (warm-up first, then the measured run) with the run's connections/pipelining/duration. */
  load(request: LoadRequest): Promise<LoadSummary>;
  log(message: string): void;
}

export interface ScenarioOutcome {
  /** The measured run reported for this scenario. */
  result: LoadSummary;
  /** What the result is compared with; defaults to ctx.baseline. */
  baseline?: LoadSummary;
  /** Required result/baseline req/s ratio; omit when the scenario has no target. */
  target?: number;
  /** A ratio of the scenario's own instead of result ÷ baseline req/s (e.g. the soak's memory growth); its meaning goes in the notes. */
  ratio?: number;
  /** The ratio must stay at or below the target, not reach it (a growth). */
  targetAtMost?: boolean;
  /** The service's memory minute by minute (the soak scenarios). */
  memory?: MemoryReport;
  /** A table of the scenario's own, shown after the run's table (e.g. every system of `peers` side by side). */
  table?: ScenarioTable;
  notes?: string[];
}

export interface ScenarioTable {
  title: string;
  header: string[];
  rows: string[][];
}

/** One reading of the service process's memory, at the end of a minute of steady load. */
export interface MemoryMinute {
  minute: number;
  phase: 'warm-up' | 'measured';
  /** VmRSS from /proc/<pid>/status. */
  rssBytes: number;
  /** V8 heap in use after a full collection: what is still referenced. */
  heapUsedBytes: number;
  /** V8 heap in use just before that collection. */
  heapUsedBeforeGcBytes: number;
  heapTotalBytes: number;
  /** Memory of C++ objects bound to JS objects, including ArrayBuffers and WebAssembly memories (PGlite's). */
  externalBytes: number;
  arrayBuffersBytes: number;
  /** Creates answered 201 during the minute. */
  created: number;
  /** Other answers during the minute, by status, and transport errors. */
  otherAnswers: Record<string, number>;
  /** Service CPU per 201 create during the minute, in µs. */
  cpuUsPerCreate: number | undefined;
  latencyMs: { p50: number; p99: number };
}

export interface MemoryReport {
  warmupMinutes: number;
  minutes: MemoryMinute[];
  /** Median RSS over the second half of the measured minutes ÷ median over the first half. */
  rssGrowthRatio: number;
  /** Heap in use after a collection, same ratio. */
  heapGrowthRatio: number;
  /** RSS at the end ÷ RSS at the end of the warm-up (single readings). */
  endToWarmupRssRatio: number;
  levelledOff: boolean;
  verdict: string;
}

export interface Scenario {
  /** Short, kebab-case; used on the command line (`npm run bench -- <name>`). */
  name: string;
  description: string;
  /** Seconds the scenario may take, for the run's time limit; default three measured runs. */
  budgetS?: number;
  /** Seconds the scenario may take beyond the harness's usual allowance (for long ones such as the soak). */
  extraBudgetS?(): number;
  run(ctx: BenchContext): Promise<ScenarioOutcome>;
}

/** A LoadSummary for a measurement made without autocannon: no status codes, and a server CPU reading only if given. */
export function measuredSummary(
  figures: Pick<LoadSummary, 'title' | 'url' | 'method' | 'connections' | 'durationS' | 'reqPerSec' | 'totalRequests'> &
    Partial<Pick<LoadSummary, 'latencyMs' | 'throughputBytesPerSec' | 'errors' | 'serverCpuPercent' | 'serverCpuUsPerRequest'>>,
): LoadSummary {
  return {
    pipelining: 1,
    latencyMs: { mean: 0, p50: 0, p90: 0, p99: 0, max: 0 },
    throughputBytesPerSec: 0,
    errors: 0,
    timeouts: 0,
    non2xx: 0,
    statusCodes: {},
    serverCpuPercent: undefined,
    serverCpuUsPerRequest: undefined,
    loadGeneratorCpuPercent: 0,
    backgroundCpuPercent: undefined,
    ...figures,
  };
}

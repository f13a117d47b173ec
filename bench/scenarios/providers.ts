import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { createKey, signUp } from '../lib/accounts.ts';
import { round } from '../lib/load.ts';
import { backendPids, runPgbench, scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import {
  cpuBetween,
  freePort,
  processCpuSeconds,
  processesCpuSeconds,
  startNodeServer,
  stopServer,
  systemBusyCpuSeconds,
  waitUntilReady,
  type ChildServer,
} from '../lib/processes.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario } from '../lib/types.ts';
import { png, SECRET, startReplicateFake, TOKEN, VERSION, type ReplicateFake } from '../../test/fakes/replicate.ts';
import { startFakeOpenAi, type FakeOpenAi } from '../../test/fakes/openai.ts';

/**
 * Jobs through real provider adapters, each against a bare client of the same provider, in one run:
 * (1) Replicate followed by its webhooks: POST /v1/generations of a model whose deployment is a Replicate
 * version, the fake (test/fakes/replicate.ts) in this process as the upstream; as soon as a prediction is
 * created the harness finishes it and delivers its signed `completed` webhook to
 * POST /v1/providers/{deployment}/events; the output file is served by the fake; the polling backstop is
 * set to 10 minutes, so completion comes by the event. (2) OpenAI chat (text_to_text) through the OpenAI
 * fake (test/fakes/openai.ts). A job counts when the workspace's event stream says it succeeded.
 * The bare clients (bench/scenarios/providers-bare-client.ts) do each provider's least protocol work on
 * undici in a process of their own, with the same number of jobs in flight, against the same fakes and the
 * same deliverer of webhooks. Each pair is measured ROUNDS times in turn; the median round is reported.
 */
const CONCURRENCY = Number(process.env.BENCH_PROVIDERS_CONCURRENCY ?? 32);
const ROUNDS = Number(process.env.BENCH_PROVIDERS_ROUNDS ?? 3);
/** The service's public address: an HTTPS one, so the Replicate adapter asks for webhooks. Never dialled. */
const SERVICE_BASE_URL = 'https://gen.example.com';
/** Where the bare client asks Replicate to send its webhooks; the deliverer maps it to the bare process. */
const BARE_WEBHOOK_URL = 'https://bare.example/hooks/replicate';
const REPLICATE_DEPLOYMENT = 'replicate-bench';
const OPENAI_DEPLOYMENT = 'openai-bench-chat';
const OPENAI_MODEL = 'gpt-4o-mini';
/**
 * A delivery answered `applied: false` came before the service wrote the prediction id: it is sent again
 * after 5 ms, then 10, 20, 40 and every 80 ms, so that waiting for the id costs the service a few requests.
 */
const REDELIVER_MS = [5, 10, 20, 40, 80];
const REDELIVER_FOR_MS = 10_000;
const TERMINAL = ['succeeded', 'failed', 'cancelled', 'expired'];
/** Seconds of the discarded first warm-up of each path through the service. */
const FIRST_WARMUP_S = 5;
/** Seconds of pgbench before each round. */
const PGBENCH_S = 3;

type Kind = 'replicate' | 'openai';
/** One finished job: when it ended (epoch ms), create → end in ms, and whether it succeeded. */
type Job = [endedAt: number, ms: number, ok: 0 | 1, generationId?: string];

/** A catalog of one plan with room for the run, and the two models measured. */
function catalog(): unknown {
  return {
    defaultPlan: 'bench',
    plans: [
      {
        id: 'bench',
        name: 'Bench',
        monthlyPriceCents: 0,
        monthlyCredits: 1_000_000_000,
        centsPerCredit: 1,
        concurrentJobs: Math.max(64, CONCURRENCY * 2),
        unfinishedJobs: 100_000,
        storageBytes: 1e12,
        maxFileBytes: 1e8,
        requestsPerMinute: 10_000_000,
      },
    ],
    models: [
      {
        id: 'bench/replicate-image',
        name: 'Replicate image',
        mode: 'text_to_image',
        maker: 'bench',
        description: 'An image model on Replicate.',
        price: { per: 'image', credits: 1 },
        plans: ['bench'],
        parameters: { prompt: { required: true } },
        sample: { prompt: 'x', note: 'bench' },
        deployments: [{ id: REPLICATE_DEPLOYMENT, provider: 'replicate', target: { version: VERSION } }],
      },
      {
        id: 'bench/openai-chat',
        name: 'OpenAI chat',
        mode: 'text_to_text',
        maker: 'bench',
        description: 'Chat completions on OpenAI.',
        price: { per: 'job', credits: 1 },
        plans: ['bench'],
        parameters: { prompt: { required: true } },
        sample: { prompt: 'x', note: 'bench' },
        deployments: [{ id: OPENAI_DEPLOYMENT, provider: 'openai', target: { model: OPENAI_MODEL } }],
      },
    ],
  };
}

/**
 * Plays Replicate's side of a webhook: each prediction the fake accepts is finished at once (starting →
 * processing → succeeded) and its signed delivery posted to the URL the create asked for, mapped from its
 * public host to the loopback process behind it. The service acknowledges a delivery for a job whose
 * prediction id it has not written yet with `applied: false`; that one is sent again (same webhook-id).
 */
class Deliverer {
  readonly agent = new Agent({ connections: 128, keepAliveTimeout: 30_000 });
  delivered = 0;
  /** Deliveries the service took before the job's prediction id was written (acknowledged, not applied). */
  early = 0;
  failed = 0;
  private seen = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly fake: ReplicateFake,
    private readonly origins: Map<string, string>,
  ) {
    // The fake has no hook on creates: its list is read every millisecond.
    this.timer = setInterval(() => this.drain(), 1);
  }

  private drain(): void {
    while (this.seen < this.fake.creates.length) {
      const create = this.fake.creates[this.seen++]!;
      const p = this.deliver(create.predictionId, String(create.body.webhook));
      this.pending.add(p);
      void p.finally(() => this.pending.delete(p));
    }
  }

  private async deliver(id: string, webhook: string): Promise<void> {
    while (this.fake.prediction(id)?.status !== 'succeeded') this.fake.advance(id);
    const { headers, body } = this.fake.webhook(id);
    const target = new URL(webhook);
    const url = `${this.origins.get(target.host)}${target.pathname}`;
    const until = Date.now() + REDELIVER_FOR_MS;
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await request(url, { method: 'POST', headers, body, dispatcher: this.agent });
        const ack = (await res.body.json()) as { applied?: boolean };
        if (res.statusCode !== 200) break;
        if (ack.applied !== false) {
          this.delivered++;
          return;
        }
        this.early++;
      } catch {
        // Counted below, like a refusal.
      }
      if (Date.now() > until) break;
      await new Promise((resolve) => setTimeout(resolve, REDELIVER_MS[Math.min(attempt, REDELIVER_MS.length - 1)]));
    }
    this.failed++;
  }

  take(): { delivered: number; early: number; failed: number } {
    const counts = { delivered: this.delivered, early: this.early, failed: this.failed };
    this.delivered = 0;
    this.early = 0;
    this.failed = 0;
    return counts;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(this.pending);
    await this.agent.close();
  }
}

/**
 * GET /v1/events/stream of one workspace, terminal transitions only: resolves each generation's wait
 * when its terminal transition arrives (or keeps it, when it arrives before the create was answered).
 */
class WorkspaceStream {
  private readonly waiting = new Map<string, (status: string) => void>();
  private readonly early = new Map<string, string>();
  private readonly abort = new AbortController();
  readonly ready: Promise<void>;
  private reading: Promise<void> = Promise.resolve();

  constructor(serviceUrl: string, key: string, workspaceId: string) {
    this.ready = new Promise((resolve, reject) => {
      const url = `${serviceUrl}/v1/events/stream?workspaceId=${workspaceId}&status=${TERMINAL.join(',')}`;
      this.reading = request(url, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' }, signal: this.abort.signal, bodyTimeout: 0 })
        .then(async (res) => {
          if (res.statusCode !== 200) throw new Error(`GET /v1/events/stream: ${res.statusCode} ${await res.body.text()}`);
          let buffer = '';
          res.body.setEncoding('utf8');
          for await (const chunk of res.body as AsyncIterable<string>) {
            buffer += chunk;
            let end: number;
            while ((end = buffer.indexOf('\n\n')) >= 0) {
              const frame = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              const event = /^event: (.*)$/m.exec(frame)?.[1];
              const data = /^data: (.*)$/m.exec(frame)?.[1];
              if (event === 'ready') resolve();
              if (event === 'transition' && data) {
                const t = JSON.parse(data) as { generationId: string; status: string };
                this.ended(t.generationId, t.status);
              }
            }
          }
        })
        .catch((error: unknown) => {
          if (!this.abort.signal.aborted) reject(error);
        });
    });
  }

  private ended(id: string, status: string): void {
    const resolve = this.waiting.get(id);
    if (resolve) {
      this.waiting.delete(id);
      resolve(status);
    } else {
      this.early.set(id, status);
    }
  }

  /** The generation's terminal status; 'no event' after 30 s. */
  until(id: string): Promise<string> {
    const known = this.early.get(id);
    if (known) {
      this.early.delete(id);
      return Promise.resolve(known);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        resolve('no event');
      }, 30_000);
      this.waiting.set(id, (status) => {
        clearTimeout(timer);
        resolve(status);
      });
    });
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.reading;
  }
}

/** A side of the comparison: start its loops; stop answers every job it finished. */
interface Driver {
  pid: number;
  start(): Promise<void>;
  stop(): Promise<Job[]>;
}

interface Workspace {
  workspaceId: string;
  key: string;
  stream: WorkspaceStream;
}

const BODIES: Record<Kind, (workspaceId: string, n: number) => string> = {
  replicate: (workspaceId, n) =>
    JSON.stringify({ workspaceId, mode: 'text_to_image', model: 'bench/replicate-image', params: { prompt: `a lighthouse at dusk ${n}` } }),
  openai: (workspaceId, n) =>
    JSON.stringify({ workspaceId, mode: 'text_to_text', model: 'bench/openai-chat', params: { prompt: `Say hello in five words (${n}).` } }),
};

/** CONCURRENCY clients of the service, each creating a job and waiting for its terminal event before the next. */
function serviceDriver(server: ExtraServer, ws: Workspace, kind: Kind): Driver {
  let running = false;
  let loops: Promise<void>[] = [];
  let jobs: Job[] = [];
  let agent: Agent | undefined;
  let n = 0;
  const headers = { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' };
  const loop = async () => {
    while (running) {
      const started = Date.now();
      let ok = false;
      let id: string | undefined;
      try {
        const res = await request(`${server.url}/v1/generations`, { method: 'POST', headers, body: BODIES[kind](ws.workspaceId, ++n), dispatcher: agent });
        id = ((await res.body.json()) as { id?: string }).id;
        if (res.statusCode === 201 && id) ok = (await ws.stream.until(id)) === 'succeeded';
      } catch {
        ok = false;
      }
      jobs.push([Date.now(), Date.now() - started, ok ? 1 : 0, id]);
    }
  };
  return {
    pid: server.pid,
    async start() {
      jobs = [];
      running = true;
      agent = new Agent({ connections: CONCURRENCY, keepAliveTimeout: 30_000 });
      loops = Array.from({ length: CONCURRENCY }, loop);
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      await agent?.close();
      return jobs;
    },
  };
}

/** The bare client process, told over HTTP to run CONCURRENCY loops of `kind`. */
function bareDriver(bare: ChildServer, kind: Kind): Driver {
  return {
    pid: bare.pid,
    async start() {
      const res = await request(`${bare.url}/control/start?kind=${kind}&concurrency=${CONCURRENCY}`, { method: 'POST' });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`bare client start: ${res.statusCode} ${text}`);
    },
    async stop() {
      const res = await request(`${bare.url}/control/stop`, { method: 'POST', bodyTimeout: 120_000, headersTimeout: 120_000 });
      const answer = (await res.body.json()) as { jobs: Job[] };
      if (res.statusCode !== 200) throw new Error(`bare client stop: ${res.statusCode} ${JSON.stringify(answer)}`);
      return answer.jobs;
    },
  };
}

interface Phase {
  summary: LoadSummary;
  failed: number;
  /** CPU µs per job of the database's backends (service side only). */
  databaseUsPerJob?: number;
  deliveries?: { delivered: number; early: number; failed: number };
  /** Where a service job's time went: p50/p99 of each step of the measured jobs' timelines. */
  steps?: string;
  /** CPU of the service process while the bare side ran (it had no job), in % of a core. */
  serviceIdlePercent?: number;
}

/** p50/p99 of each step of these generations' timelines (queued → reserved → submitted → running → succeeded). */
async function timelineSteps(db: ScratchDatabase, ids: string[]): Promise<string> {
  const { rows } = await db.query<{ step: string; p50: number; p99: number }>(
    `select s.status as step, percentile_cont(0.5) within group (order by s.ms) as p50, percentile_cont(0.99) within group (order by s.ms) as p99
       from generations g,
       lateral (select e->>'status' as status, n,
                       extract(epoch from ((e->>'at')::timestamptz - lag((e->>'at')::timestamptz) over (order by n))) * 1000 as ms
                  from jsonb_array_elements(g.timeline) with ordinality as t(e, n)) s
      where g.id = any($1) and s.ms is not null
      group by s.status order by min(s.n)`,
    [ids],
  );
  return rows.map((r) => `→ ${r.step} ${round(Number(r.p50), 1)}/${round(Number(r.p99), 1)} ms`).join(', ');
}

function quantile(sorted: number[], p: number): number {
  return round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN, 1);
}

/**
 * Runs a driver for the warm-up (discarded) and the measured window: jobs that ended in the window, the
 * CPU of the driver's process over it, of the database's backends (with `db`), of this process (the fakes,
 * the deliverer and, for the service, its clients) and of every other process (noise).
 */
async function measure(
  ctx: BenchContext,
  title: string,
  driver: Driver,
  deliverer: Deliverer | undefined,
  db?: ScratchDatabase,
  idlePid?: number,
): Promise<Phase> {
  await driver.start();
  await new Promise((resolve) => setTimeout(resolve, ctx.options.warmupS * 1000));
  deliverer?.take();
  const backendsBefore = db ? processesCpuSeconds(await backendPids(db)) : undefined;
  const cpuBefore = processCpuSeconds(driver.pid);
  const idleBefore = idlePid === undefined ? undefined : processCpuSeconds(idlePid);
  const systemBefore = systemBusyCpuSeconds();
  const ownBefore = process.cpuUsage();
  const t0 = Date.now();
  await new Promise((resolve) => setTimeout(resolve, ctx.options.durationS * 1000));
  const t1 = Date.now();
  const cpuAfter = processCpuSeconds(driver.pid);
  const idleAfter = idlePid === undefined ? undefined : processCpuSeconds(idlePid);
  const systemAfter = systemBusyCpuSeconds();
  const own = process.cpuUsage(ownBefore);
  const backendsAfter = db ? processesCpuSeconds(await backendPids(db)) : undefined;
  const deliveries = deliverer?.take();
  const jobs = await driver.stop();

  const wallS = (t1 - t0) / 1000;
  const inWindow = jobs.filter(([endedAt]) => endedAt >= t0 && endedAt < t1);
  const ok = inWindow.filter(([, , good]) => good === 1);
  const latencies = ok.map(([, ms]) => ms).sort((a, b) => a - b);
  const cpuS = cpuBefore !== undefined && cpuAfter !== undefined ? cpuAfter - cpuBefore : undefined;
  const ownS = (own.user + own.system) / 1e6;
  const idleS = idleBefore !== undefined && idleAfter !== undefined ? idleAfter - idleBefore : 0;
  const backgroundS =
    cpuS !== undefined && systemBefore !== undefined && systemAfter !== undefined ? Math.max(0, systemAfter - systemBefore - cpuS - ownS - idleS) : undefined;
  const idlePercent = idleBefore !== undefined && idleAfter !== undefined ? round((idleS / wallS) * 100, 1) : undefined;
  const databaseS = cpuBetween(backendsBefore, backendsAfter);
  const ids = ok.flatMap(([, , , id]) => (id ? [id] : []));
  const steps = db && ids.length > 0 ? await timelineSteps(db, ids) : undefined;
  const summary: LoadSummary = {
    title,
    url: 'loopback',
    method: 'job',
    connections: CONCURRENCY,
    pipelining: 1,
    durationS: round(wallS, 2),
    reqPerSec: round(ok.length / wallS, 1),
    totalRequests: ok.length,
    latencyMs: {
      mean: round(latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length), 2),
      p50: quantile(latencies, 50),
      p90: quantile(latencies, 90),
      p99: quantile(latencies, 99),
      max: quantile(latencies, 100),
    },
    throughputBytesPerSec: 0,
    errors: inWindow.length - ok.length,
    timeouts: 0,
    non2xx: 0,
    statusCodes: {},
    serverCpuPercent: cpuS === undefined ? undefined : round((cpuS / wallS) * 100, 1),
    serverCpuUsPerRequest: cpuS === undefined || ok.length === 0 ? undefined : round((cpuS * 1e6) / ok.length, 1),
    loadGeneratorCpuPercent: round((ownS / wallS) * 100, 1),
    backgroundCpuPercent: backgroundS === undefined ? undefined : round((backgroundS / wallS) * 100, 1),
  };
  ctx.log(
    `${title}: ${summary.reqPerSec} jobs/s, p50 ${summary.latencyMs.p50} ms, p99 ${summary.latencyMs.p99} ms, ${summary.errors} not succeeded; ` +
      `CPU µs/job ${summary.serverCpuUsPerRequest ?? '?'} (process at ${summary.serverCpuPercent ?? '?'}% of a core)${databaseS === undefined || ok.length === 0 ? '' : `, database ${round((databaseS * 1e6) / ok.length, 1)} µs/job`}; ` +
      `this process ${summary.loadGeneratorCpuPercent}%, other processes ${summary.backgroundCpuPercent ?? '?'}%` +
      `${deliveries ? `; webhooks applied ${deliveries.delivered}, early (sent again) ${deliveries.early}, given up ${deliveries.failed}` : ''}` +
      `${steps ? `; timeline steps p50/p99 ${steps}` : ''}` +
      `${idlePercent === undefined ? '' : `; the idle service process meanwhile ${idlePercent}% of a core`}`,
  );
  return {
    summary,
    failed: summary.errors,
    ...(databaseS === undefined || ok.length === 0 ? {} : { databaseUsPerJob: round((databaseS * 1e6) / ok.length, 1) }),
    ...(deliveries ? { deliveries } : {}),
    ...(steps ? { steps } : {}),
    ...(idlePercent === undefined ? {} : { serviceIdlePercent: idlePercent }),
  };
}

interface Round {
  service: Phase;
  bare: Phase;
  ratio: number;
  /** pgbench's one client on the scratch database just before the round: the commit latency of the moment. */
  commits?: string;
}

const median = (rounds: Round[]) => [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(rounds.length / 2)]!;

/** One job through the service, checked to its output: the model and its deployment work before anything is timed. */
async function probe(server: ExtraServer, ws: Workspace, kind: Kind): Promise<void> {
  const res = await request(`${server.url}/v1/generations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' },
    body: BODIES[kind](ws.workspaceId, 0),
  });
  const created = (await res.body.json()) as { id?: string };
  if (res.statusCode !== 201 || !created.id) throw new Error(`probe ${kind}: ${res.statusCode} ${JSON.stringify(created)}`);
  const status = await ws.stream.until(created.id);
  const got = await request(`${server.url}/v1/generations/${created.id}?workspaceId=${ws.workspaceId}`, { headers: { authorization: `Bearer ${ws.key}` } });
  const generation = (await got.body.json()) as { status?: string; outputAssetIds?: string[]; textOutput?: string; errorCode?: string; errorMessage?: string };
  const produced =
    kind === 'replicate' ? generation.outputAssetIds?.length === 1 : typeof generation.textOutput === 'string' && generation.textOutput.length > 0;
  if (status !== 'succeeded' || generation.status !== 'succeeded' || !produced) {
    throw new Error(
      `probe ${kind}: ${status}, ${JSON.stringify({ status: generation.status, errorCode: generation.errorCode, errorMessage: generation.errorMessage })}`,
    );
  }
}

function describe(r: Round, kind: Kind): string {
  const s = r.service.summary;
  const b = r.bare.summary;
  const early =
    r.service.deliveries && s.totalRequests > 0 ? `, ${round(r.service.deliveries.early / s.totalRequests, 2)} early deliveries sent again per job` : '';
  return (
    `${kind}: service ${s.reqPerSec} jobs/s (p50 ${s.latencyMs.p50} ms, p99 ${s.latencyMs.p99} ms; ${s.serverCpuUsPerRequest ?? '?'} µs CPU/job, database ${r.service.databaseUsPerJob ?? '?'} µs/job${early}; other processes ${s.backgroundCpuPercent ?? '?'}% of a core; timeline steps p50/p99 ${r.service.steps ?? '?'})` +
    ` ÷ bare ${b.reqPerSec} jobs/s (p50 ${b.latencyMs.p50} ms; ${b.serverCpuUsPerRequest ?? '?'} µs CPU/job; other processes ${b.backgroundCpuPercent ?? '?'}%; the service process meanwhile, without jobs, ${r.bare.serviceIdlePercent ?? '?'}% of a core) = ${r.ratio.toFixed(2)}` +
    `${r.commits ? `; pgbench one-row insert, 1 client, just before: ${r.commits}` : ''}`
  );
}

export const providers: Scenario = {
  name: 'providers',
  description:
    'jobs/s through real provider adapters (Replicate by webhook, OpenAI chat) against the fakes, each ÷ a bare undici client of the same fake, PostgreSQL',
  budgetS: 120,
  extraBudgetS: () => ROUNDS * 4 * (Number(process.env.BENCH_WARMUP_S ?? 2) + Number(process.env.BENCH_DURATION_S ?? 10) + 15),
  async run(ctx) {
    const cleanups: Array<() => Promise<unknown>> = [];
    try {
      const replicate = await startReplicateFake({ token: TOKEN, webhookSecret: SECRET });
      cleanups.push(() => replicate.close());
      replicate.scenario(`version:${VERSION}`, { advance: 'manual', end: { status: 'succeeded', output: [replicate.file('out.png', png(64, 64))] } });
      const openai: FakeOpenAi = await startFakeOpenAi();
      cleanups.push(() => openai.close());

      const db = await scratchDatabase();
      cleanups.push(() => db.drop());
      const dir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-providers-'));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      const catalogFile = path.join(dir, 'catalog.json');
      await writeFile(catalogFile, JSON.stringify(catalog()));

      const server = await ctx.startService('service (PostgreSQL, Replicate and OpenAI fakes)', {
        DATABASE_URL: db.url,
        DATA_DIR: path.join(dir, 'data'),
        CATALOG_FILE: catalogFile,
        BASE_URL: SERVICE_BASE_URL,
        REPLICATE_API_TOKEN: TOKEN,
        REPLICATE_BASE_URL: replicate.baseUrl,
        REPLICATE_WEBHOOK_SECRET: SECRET,
        OPENAI_API_KEY: openai.apiKey,
        OPENAI_BASE_URL: openai.url,
        // The backstop poll never comes during a job: completion is the webhook's.
        PROVIDER_POLL_MS: '600000',
      });
      cleanups.push(() => server.stop());
      const bare = startNodeServer('bare provider clients', 'bench/scenarios/providers-bare-client.ts', await freePort(), {
        BARE_REPLICATE_BASE_URL: replicate.baseUrl,
        BARE_REPLICATE_TOKEN: TOKEN,
        BARE_REPLICATE_SECRET: SECRET,
        BARE_REPLICATE_VERSION: VERSION,
        BARE_WEBHOOK_URL,
        BARE_OPENAI_BASE_URL: openai.url,
        BARE_OPENAI_KEY: openai.apiKey,
        BARE_OPENAI_MODEL: OPENAI_MODEL,
      });
      cleanups.push(() => stopServer(bare));
      await waitUntilReady(bare, '/health/ready', 60_000);

      const deliverer = new Deliverer(
        replicate,
        new Map([
          [new URL(SERVICE_BASE_URL).host, server.url],
          [new URL(BARE_WEBHOOK_URL).host, bare.url],
        ]),
      );
      cleanups.push(() => deliverer.close());

      const account = await signUp(server.url);
      const key = await createKey(server.url, account, ['generations.write', 'generations.read']);
      const stream = new WorkspaceStream(server.url, key, account.workspaceId);
      cleanups.push(() => stream.close());
      await Promise.race([
        stream.ready,
        new Promise((_, reject) => setTimeout(() => reject(new Error('the workspace event stream did not open in 30 s')), 30_000).unref()),
      ]);
      const ws: Workspace = { workspaceId: account.workspaceId, key, stream };
      await probe(server, ws, 'replicate');
      await probe(server, ws, 'openai');

      const rounds: Record<Kind, Round[]> = { replicate: [], openai: [] };
      // A first warm-up of each path through the service (modules loaded on first use, JIT, pools), discarded.
      for (const kind of ['replicate', 'openai'] as const) {
        const driver = serviceDriver(server, ws, kind);
        await driver.start();
        await new Promise((resolve) => setTimeout(resolve, FIRST_WARMUP_S * 1000));
        await driver.stop();
      }
      deliverer.take();
      await db.query('create table bench_rows (id bigserial primary key, payload text not null)');
      for (let i = 1; i <= ROUNDS; i++) {
        // The commit latency of the moment: the service's jobs wait on several commits each, the bare clients on none.
        const pgbench = await runPgbench(db.url, "insert into bench_rows (payload) values ('one durable row');\n", 1, PGBENCH_S);
        const commits = `${Math.round(pgbench.tps)} tps, ${pgbench.latencyMsAverage} ms per commit`;
        ctx.log(`round ${i}: pgbench one-row insert, 1 client: ${commits}`);
        for (const kind of ['replicate', 'openai'] as const) {
          const label = kind === 'replicate' ? 'Replicate create → webhook → output' : 'OpenAI POST /chat/completions';
          const service = await measure(
            ctx,
            `service: ${label} (round ${i})`,
            serviceDriver(server, ws, kind),
            kind === 'replicate' ? deliverer : undefined,
            db,
          );
          const bareSide = await measure(
            ctx,
            `bare undici: ${label} (round ${i})`,
            bareDriver(bare, kind),
            kind === 'replicate' ? deliverer : undefined,
            undefined,
            server.pid,
          );
          // What the OpenAI fake records of each request is not needed here; kept, it would weigh on this process's GC.
          openai.received.length = 0;
          rounds[kind].push({
            service,
            bare: bareSide,
            ratio: bareSide.summary.reqPerSec > 0 ? round(service.summary.reqPerSec / bareSide.summary.reqPerSec, 3) : 0,
            commits,
          });
        }
      }

      const chosen = median(rounds.replicate);
      const chat = median(rounds.openai);
      const cpuRatio = (r: Round) =>
        r.bare.summary.serverCpuUsPerRequest && r.service.summary.serverCpuUsPerRequest
          ? (r.bare.summary.serverCpuUsPerRequest / r.service.summary.serverCpuUsPerRequest).toFixed(2)
          : '?';
      const notFinished = [...rounds.replicate, ...rounds.openai].reduce((sum, r) => sum + r.service.failed + r.bare.failed, 0);
      return {
        result: chosen.service.summary,
        baseline: chosen.bare.summary,
        ratio: chosen.ratio,
        notes: [
          `${CONCURRENCY} jobs in flight on each side (closed loops), one workspace; ${FIRST_WARMUP_S} s of each kind through the service first, discarded; then ${ctx.options.warmupS} s warm-up + ${ctx.options.durationS} s per side, ${ROUNDS} rounds taken in turn (service, bare; Replicate, then OpenAI); the median round by ratio is reported; the CPU columns are per job: the service process, and the bare client's process`,
          `Replicate, median round: ${describe(chosen, 'replicate')}; CPU ratio ${cpuRatio(chosen)}`,
          `OpenAI chat, median round: ${describe(chat, 'openai')}; CPU ratio ${cpuRatio(chat)}`,
          ...rounds.replicate.map((r, i) => `round ${i + 1}: ${describe(r, 'replicate')}`),
          ...rounds.openai.map((r, i) => `round ${i + 1}: ${describe(r, 'openai')}`),
          `jobs that did not succeed in the measured windows, both sides, every round: ${notFinished}`,
          "the fakes, the webhook deliverer and the service's clients run in the harness process; a delivery the service acknowledges with applied: false (the prediction id not yet written) is sent again with the same webhook-id after 5, 10, 20, 40, then every 80 ms",
        ],
      };
    } finally {
      for (const cleanup of cleanups.reverse()) await cleanup().catch((error: unknown) => ctx.log(`providers: cleanup failed: ${String(error)}`));
    }
  },
};

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { startFakeOpenAi, type FakeOpenAi } from '../../test/fakes/openai.ts';
import { createKey, signUp } from '../lib/accounts.ts';
import { round } from '../lib/load.ts';
import { scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import { processCpuSeconds } from '../lib/processes.ts';
import { describeDatabase } from '../lib/report.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario, ScenarioOutcome } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';

/**
 * The OpenAI-compatible door (http/routes/openai/) against the OpenAI call it stands for, one sequential
 * client, one run: the OpenAI fake (test/fakes/openai.ts) in the harness process as the upstream, a
 * service whose catalog has one text_to_text model with an `openai` deployment on that fake, and per line
 * REQUESTS requests after WARMUP discarded ones:
 * 1. direct: POST <fake>/v1/chat/completions, whole (the baseline);
 * 2. door: POST /openai/v1/chat/completions, whole, with one of our API keys;
 * 3. door streamed (`stream: true`, `include_usage`): the time to the first chunk with content and to [DONE];
 * 4. direct streamed: the same to the fake, when it streams (a fake that refuses `stream` leaves the line out);
 * 5. job API: POST /v1/generations (the same model) then GET /v1/generations/:id/stream until its `end` event.
 * Every line goes through the same undici Agent (keep-alive, one connection per origin), lines taken in turn,
 * BLOCK requests at a time, so the drift of a shared machine falls on each alike; the service process's CPU
 * is read around each block. `gateway` runs on the run's database (PGlite in memory unless
 * BENCH_DATABASE_URL says otherwise), `gateway-postgres` on a scratch PostgreSQL database.
 */
const REQUESTS = Number(process.env.BENCH_GATEWAY_REQUESTS ?? 300);
const WARMUP = Number(process.env.BENCH_GATEWAY_WARMUP ?? 30);
/** Requests of one line in a row before the next line takes over. */
const BLOCK = 25;
const MODEL = 'bench/openai-chat';
const DEPLOYMENT = 'openai-bench-chat';
const UPSTREAM_MODEL = 'gpt-4o-mini';
/** The fake echoes the last message: about twenty pieces when streamed. */
const PROMPT = 'Write one sentence about a lighthouse keeper who counts the ships that pass her light at night, and why.';
const MESSAGES = [{ role: 'user', content: PROMPT }];
/** Longest wait for a head or between two pieces of a body before a request counts as failed. */
const TIMEOUT_MS = 30_000;

/** A catalog of one plan with room for the run, and the one model measured. */
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
        concurrentJobs: 64,
        unfinishedJobs: 100_000,
        storageBytes: 1e12,
        maxFileBytes: 1e8,
        requestsPerMinute: 10_000_000,
      },
    ],
    models: [
      {
        id: MODEL,
        name: 'OpenAI chat',
        mode: 'text_to_text',
        maker: 'bench',
        description: 'Chat completions on OpenAI.',
        price: { per: 'job', credits: 1 },
        plans: ['bench'],
        parameters: { prompt: { required: true } },
        sample: { prompt: 'x', note: 'bench' },
        deployments: [{ id: DEPLOYMENT, provider: 'openai', target: { model: UPSTREAM_MODEL } }],
      },
    ],
  };
}

type LineName = 'direct' | 'door' | 'door-stream' | 'direct-stream' | 'jobs';

/** One request's times from its start, in ms: to the end (the answer read, [DONE], or `end`) and to its first piece of text. */
interface Timing {
  ms: number;
  firstMs?: number;
  /** Job API: the 201 of the create. */
  createdMs?: number;
}

interface Line {
  name: LineName;
  title: string;
  run(): Promise<Timing>;
  latencies: number[];
  firsts: number[];
  created: number[];
  errors: number;
  lastError?: string;
  wallS: number;
  serviceCpuS: number;
}

class RequestFailed extends Error {}

/** Reads a server-sent event stream to its end, calling `frame` for each event (its name, `message` when unnamed, and its data). */
async function readEvents(
  body: AsyncIterable<string> & { setEncoding(encoding: 'utf8'): unknown },
  frame: (event: string, data: string) => void,
): Promise<void> {
  body.setEncoding('utf8');
  let buffer = '';
  for await (const chunk of body) {
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const text = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of text.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length > 0) frame(event, data.join('\n'));
    }
  }
}

/** The clients of each line, on one Agent. */
function clients(agent: Agent, fake: FakeOpenAi, serviceUrl: string, key: string, workspaceId: string) {
  const json = { 'content-type': 'application/json' };
  const upstream = { ...json, authorization: `Bearer ${fake.apiKey}` };
  const ours = { ...json, authorization: `Bearer ${key}` };
  const whole = (model: string) => JSON.stringify({ model, messages: MESSAGES });
  const streamed = (model: string) => JSON.stringify({ model, messages: MESSAGES, stream: true, stream_options: { include_usage: true } });
  const post = (url: string, headers: Record<string, string>, body: string) =>
    request(url, { method: 'POST', headers, body, dispatcher: agent, headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS });

  /** A chat completion answered whole: timed until its JSON is read. */
  const completion = async (url: string, headers: Record<string, string>, body: string): Promise<Timing> => {
    const t0 = performance.now();
    const res = await post(url, headers, body);
    const text = await res.body.text();
    const ms = performance.now() - t0;
    const content =
      res.statusCode === 200 ? (JSON.parse(text) as { choices?: Array<{ message?: { content?: unknown } }> }).choices?.[0]?.message?.content : undefined;
    if (typeof content !== 'string' || content === '') throw new RequestFailed(`${res.statusCode} ${text.slice(0, 300)}`);
    return { ms };
  };

  /** A chat completion streamed: the first chunk with content, then [DONE]; the body is read to its end (keep-alive). */
  const chunks = async (url: string, headers: Record<string, string>, body: string): Promise<Timing> => {
    const t0 = performance.now();
    const res = await post(url, headers, body);
    if (res.statusCode !== 200 || !String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
      throw new RequestFailed(`${res.statusCode} ${res.headers['content-type']} ${(await res.body.text()).slice(0, 300)}`);
    }
    let firstMs: number | undefined;
    let doneMs: number | undefined;
    let failure: string | undefined;
    await readEvents(res.body, (_event, data) => {
      if (data === '[DONE]') {
        doneMs ??= performance.now() - t0;
        return;
      }
      const chunk = JSON.parse(data) as { error?: unknown; choices?: Array<{ delta?: { content?: unknown } }> };
      if (chunk.error) failure ??= data.slice(0, 300);
      const content = chunk.choices?.[0]?.delta?.content;
      if (firstMs === undefined && typeof content === 'string' && content !== '') firstMs = performance.now() - t0;
    });
    if (failure || firstMs === undefined || doneMs === undefined)
      throw new RequestFailed(failure ?? `the stream ended without ${firstMs === undefined ? 'content' : '[DONE]'}`);
    return { ms: doneMs, firstMs };
  };

  /** POST /v1/generations, then its stream until `end`; the body is read to its end. */
  const job = async (): Promise<Timing> => {
    const t0 = performance.now();
    const created = await post(
      `${serviceUrl}/v1/generations`,
      ours,
      JSON.stringify({ workspaceId, mode: 'text_to_text', model: MODEL, params: { prompt: PROMPT } }),
    );
    const answer = await created.body.text();
    const createdMs = performance.now() - t0;
    if (created.statusCode !== 201) throw new RequestFailed(`create: ${created.statusCode} ${answer.slice(0, 300)}`);
    const { id } = JSON.parse(answer) as { id: string };
    const res = await request(`${serviceUrl}/v1/generations/${id}/stream?workspaceId=${workspaceId}`, {
      headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
      dispatcher: agent,
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
    });
    if (res.statusCode !== 200) throw new RequestFailed(`stream: ${res.statusCode} ${(await res.body.text()).slice(0, 300)}`);
    let firstMs: number | undefined;
    let endMs: number | undefined;
    let status: string | undefined;
    await readEvents(res.body, (event, data) => {
      if (event === 'output') firstMs ??= performance.now() - t0;
      if (event === 'end') {
        endMs ??= performance.now() - t0;
        status = (JSON.parse(data) as { status?: string }).status;
      }
    });
    if (endMs === undefined || status !== 'succeeded') throw new RequestFailed(`the stream ended ${endMs === undefined ? 'without its end event' : status}`);
    return { ms: endMs, createdMs, ...(firstMs === undefined ? {} : { firstMs }) };
  };

  return {
    direct: () => completion(`${fake.url}/chat/completions`, upstream, whole(UPSTREAM_MODEL)),
    door: () => completion(`${serviceUrl}/openai/v1/chat/completions`, ours, whole(MODEL)),
    doorStream: () => chunks(`${serviceUrl}/openai/v1/chat/completions`, ours, streamed(MODEL)),
    directStream: () => chunks(`${fake.url}/chat/completions`, upstream, streamed(UPSTREAM_MODEL)),
    job,
  };
}

function newLine(name: LineName, title: string, run: () => Promise<Timing>): Line {
  return { name, title, run, latencies: [], firsts: [], created: [], errors: 0, wallS: 0, serviceCpuS: 0 };
}

/** `count` requests of a line one after another; with `keep`, their times and the service's CPU are added to it. */
async function block(line: Line, count: number, servicePid: number, keep: boolean): Promise<void> {
  const cpuBefore = processCpuSeconds(servicePid);
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    try {
      const timing = await line.run();
      if (!keep) continue;
      line.latencies.push(timing.ms);
      if (timing.firstMs !== undefined) line.firsts.push(timing.firstMs);
      if (timing.createdMs !== undefined) line.created.push(timing.createdMs);
    } catch (error) {
      if (!keep) continue;
      line.errors++;
      line.lastError = error instanceof RequestFailed ? error.message : String(error);
    }
  }
  if (!keep) return;
  line.wallS += (performance.now() - t0) / 1000;
  const cpuAfter = processCpuSeconds(servicePid);
  if (cpuBefore !== undefined && cpuAfter !== undefined) line.serviceCpuS += cpuAfter - cpuBefore;
}

function quantile(sorted: number[], p: number): number {
  return round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN, 2);
}

interface Figures {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

function figuresOf(values: number[]): Figures {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50: quantile(sorted, 50),
    p90: quantile(sorted, 90),
    p99: quantile(sorted, 99),
    max: quantile(sorted, 100),
    mean: round(sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length), 2),
  };
}

const cpuPerRequest = (line: Line) => (line.latencies.length === 0 ? undefined : round((line.serviceCpuS * 1e6) / line.latencies.length, 1));

function summaryOf(line: Line, database: string): LoadSummary {
  const f = figuresOf(line.latencies);
  return measuredSummary({
    title: `one client, ${line.title} (${database})`,
    url: line.name.startsWith('direct') ? 'OpenAI fake /v1/chat/completions' : line.name === 'jobs' ? '/v1/generations' : '/openai/v1/chat/completions',
    method: 'POST',
    connections: 1,
    durationS: round(line.wallS, 2),
    reqPerSec: line.wallS === 0 ? 0 : round(f.count / line.wallS, 1),
    totalRequests: f.count,
    latencyMs: { mean: f.mean, p50: f.p50, p90: f.p90, p99: f.p99, max: f.max },
    errors: line.errors,
    serverCpuUsPerRequest: cpuPerRequest(line),
  });
}

/** Whether the fake answers `stream: true` with an event stream ending in [DONE]; why not otherwise. */
async function fakeStreams(run: () => Promise<Timing>): Promise<string | undefined> {
  try {
    await run();
    return undefined;
  } catch (error) {
    return error instanceof RequestFailed ? error.message : String(error);
  }
}

async function measure(ctx: BenchContext, database: string, db?: ScratchDatabase): Promise<ScenarioOutcome> {
  const cleanups: Array<() => Promise<unknown>> = [];
  try {
    const fake = await startFakeOpenAi();
    cleanups.push(() => fake.close());
    const dir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-gateway-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const catalogFile = path.join(dir, 'catalog.json');
    await writeFile(catalogFile, JSON.stringify(catalog()));
    const server: ExtraServer = await ctx.startService(`service (${database}, OpenAI fake)`, {
      ...(db ? { DATABASE_URL: db.url } : {}),
      DATA_DIR: path.join(dir, 'data'),
      CATALOG_FILE: catalogFile,
      OPENAI_API_KEY: fake.apiKey,
      OPENAI_BASE_URL: fake.url,
    });
    cleanups.push(() => server.stop());
    const account = await signUp(server.url);
    const key = await createKey(server.url, account, ['generations.write', 'generations.read']);
    const agent = new Agent({ connections: 1, keepAliveTimeout: 60_000, keepAliveMaxTimeout: 60_000 });
    cleanups.push(() => agent.close());
    const c = clients(agent, fake, server.url, key, account.workspaceId);

    // Each path once, checked, before anything is timed.
    for (const [name, run] of [
      ['direct', c.direct],
      ['door', c.door],
      ['door streamed', c.doorStream],
      ['job API', c.job],
    ] as const) {
      const refused = await fakeStreams(run);
      if (refused) throw new Error(`gateway probe, ${name}: ${refused}`);
    }
    const directStreamRefused = await fakeStreams(c.directStream);
    if (directStreamRefused) ctx.log(`gateway: the fake does not stream (${directStreamRefused}): the direct streamed line is left out`);

    const lines: Line[] = [
      newLine('direct', 'POST <fake>/v1/chat/completions, whole (the baseline)', c.direct),
      newLine('door', 'POST /openai/v1/chat/completions, whole', c.door),
      newLine('door-stream', 'POST /openai/v1/chat/completions, stream: true', c.doorStream),
      ...(directStreamRefused ? [] : [newLine('direct-stream', 'POST <fake>/v1/chat/completions, stream: true', c.directStream)]),
      newLine('jobs', 'POST /v1/generations, then GET /v1/generations/:id/stream until end', c.job),
    ];
    ctx.log(`gateway: ${WARMUP} warm-up requests per line (discarded), then ${REQUESTS} per line, ${BLOCK} at a time, lines in turn`);
    for (let done = 0; done < WARMUP; done += BLOCK) {
      for (const line of lines) await block(line, Math.min(BLOCK, WARMUP - done), server.pid, false);
      fake.received.length = 0;
    }
    for (let done = 0; done < REQUESTS; done += BLOCK) {
      for (const line of lines) await block(line, Math.min(BLOCK, REQUESTS - done), server.pid, true);
      // What the fake records of each request is not needed; kept, it would weigh on this process's GC.
      fake.received.length = 0;
    }

    const direct = figuresOf(lines[0]!.latencies);
    const row = (label: string, line: Line, f: Figures): string[] => [
      label,
      String(f.count),
      String(f.p50),
      String(f.p90),
      String(f.p99),
      String(round(f.p50 - direct.p50, 2)),
      (f.p50 / direct.p50).toFixed(2),
      String(line.errors),
      String(cpuPerRequest(line) ?? '?'),
    ];
    const rows: string[][] = [];
    const notes: string[] = [];
    const describe = (label: string, f: Figures) =>
      `${label}: p50 ${f.p50} ms, p90 ${f.p90} ms, p99 ${f.p99} ms, max ${f.max} ms (${f.count} requests); p50 added over the direct call ${round(f.p50 - direct.p50, 2)} ms, ${(f.p50 / direct.p50).toFixed(2)}× its p50`;
    const byName = new Map(lines.map((l) => [l.name, l]));
    for (const line of lines) {
      const whole = figuresOf(line.latencies);
      const first = figuresOf(line.firsts);
      const cpu = `the service's CPU ${cpuPerRequest(line) ?? '?'} µs per request`;
      const failed = line.errors > 0 ? `; ${line.errors} failed, the last: ${line.lastError}` : '';
      switch (line.name) {
        case 'direct':
        case 'door':
          rows.push(row(line.name === 'direct' ? 'direct (baseline)' : 'door, whole', line, whole));
          notes.push(`${describe(line.title, whole)}; ${cpu}${failed}`);
          break;
        case 'door-stream':
        case 'direct-stream': {
          const label = line.name === 'door-stream' ? 'door, streamed' : 'direct, streamed';
          rows.push(row(`${label}: first content chunk`, line, first), row(`${label}: [DONE]`, line, whole));
          notes.push(`${describe(`${line.title}, to the first chunk with content`, first)}; ${describe('to [DONE]', whole)}; ${cpu}${failed}`);
          break;
        }
        case 'jobs': {
          const created = figuresOf(line.created);
          rows.push(row('job API: create → end event', line, whole));
          notes.push(
            `${describe(line.title, whole)}; the 201 of the create p50 ${created.p50} ms, p99 ${created.p99} ms; ` +
              (line.firsts.length > 0
                ? `the first output event p50 ${first.p50} ms, p99 ${first.p99} ms (${line.firsts.length} of ${line.latencies.length} jobs; the others had ended before their stream opened: state, then end)`
                : 'no output event: the adapter did not stream the upstream answer, or every job ended before its stream opened') +
              `; ${cpu}${failed}`,
          );
          break;
        }
      }
    }
    const doorStream = byName.get('door-stream');
    const directStream = byName.get('direct-stream');
    if (doorStream && directStream) {
      const [dF, uF] = [figuresOf(doorStream.firsts), figuresOf(directStream.firsts)];
      const [dD, uD] = [figuresOf(doorStream.latencies), figuresOf(directStream.latencies)];
      notes.push(
        `streamed, door over direct: the first content chunk p50 +${round(dF.p50 - uF.p50, 2)} ms (${(dF.p50 / uF.p50).toFixed(2)}×), [DONE] p50 +${round(dD.p50 - uD.p50, 2)} ms (${(dD.p50 / uD.p50).toFixed(2)}×)`,
      );
    } else {
      notes.push(`direct streamed line left out: the fake answered stream: true with ${directStreamRefused}`);
    }
    notes.unshift(
      `one sequential client (undici request on one keep-alive Agent, one connection per origin) in the harness process, as is the OpenAI fake; ${database}; ${WARMUP} warm-up requests per line (discarded), then ${REQUESTS} per line (BENCH_GATEWAY_WARMUP, BENCH_GATEWAY_REQUESTS), ${BLOCK} at a time, lines in turn; ratio = the door's (whole) requests/s ÷ the direct call's; the table's "× direct" = p50 ÷ the direct call's p50`,
    );
    for (const line of lines) ctx.log(`gateway, ${line.name}: ${notes.find((n) => n.startsWith(line.title)) ?? ''}`);
    return {
      result: summaryOf(byName.get('door')!, database),
      baseline: summaryOf(byName.get('direct')!, database),
      table: {
        title: `one sequential client, ${REQUESTS} requests per line (${database})`,
        header: ['line', 'requests', 'p50 ms', 'p90 ms', 'p99 ms', 'p50 added over direct ms', '× direct (p50)', 'errors', 'service CPU µs/req'],
        rows,
      },
      notes,
    };
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((error: unknown) => ctx.log(`gateway: cleanup failed: ${String(error)}`));
  }
}

export const gateway: Scenario = {
  name: 'gateway',
  description:
    "the OpenAI-compatible door (whole and streamed: first chunk, [DONE]) and the job API (create, then its stream to end) against the same chat call straight to the OpenAI fake, one sequential client (the run's database: PGlite in memory by default)",
  budgetS: 600,
  run: (ctx) => measure(ctx, describeDatabase(process.env.BENCH_DATABASE_URL?.trim() || 'memory://')),
};

export const gatewayPostgres: Scenario = {
  name: 'gateway-postgres',
  description: 'gateway with the service on PostgreSQL (a scratch database)',
  budgetS: 600,
  async run(ctx) {
    const db = await scratchDatabase();
    try {
      return await measure(ctx, 'PostgreSQL (a scratch database)', db);
    } finally {
      await db.drop();
    }
  },
};

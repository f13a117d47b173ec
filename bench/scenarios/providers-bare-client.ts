// The bare clients the `providers` scenario (bench/scenarios/providers.ts) compares the service with, in a
// process of their own as the service is, so each side's CPU is read alone. What any client of the
// provider must do at the least, on undici: for Replicate, create a prediction asking for a webhook,
// receive that webhook (Standard Webhooks signature checked in constant time) and fetch the output file;
// for OpenAI, one POST /chat/completions and its answer read. Nothing is stored.
//
// Listens on HOST:PORT: GET /health/ready; POST /hooks/replicate (the webhooks); POST /control/start?kind=
// replicate|openai&concurrency=N starts N closed loops; POST /control/stop stops them and answers every
// job's [ended at (epoch ms), create → done ms, ok]. Settings by environment: BARE_REPLICATE_BASE_URL,
// BARE_REPLICATE_TOKEN, BARE_REPLICATE_SECRET, BARE_REPLICATE_VERSION, BARE_WEBHOOK_URL, BARE_OPENAI_BASE_URL,
// BARE_OPENAI_KEY, BARE_OPENAI_MODEL.
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { Agent, request } from 'undici';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const replicate = {
  baseUrl: env('BARE_REPLICATE_BASE_URL'),
  token: env('BARE_REPLICATE_TOKEN'),
  key: Buffer.from(env('BARE_REPLICATE_SECRET').replace(/^whsec_/, ''), 'base64'),
  version: env('BARE_REPLICATE_VERSION'),
  webhook: env('BARE_WEBHOOK_URL'),
};
const openai = { baseUrl: env('BARE_OPENAI_BASE_URL'), key: env('BARE_OPENAI_KEY'), model: env('BARE_OPENAI_MODEL') };
const MAX_BODY_BYTES = 1024 * 1024;
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
const TOLERANCE_MS = 5 * 60 * 1000;
const WEBHOOK_WAIT_MS = 30_000;

type Job = [endedAt: number, ms: number, ok: 0 | 1];
let jobs: Job[] = [];
let running = false;
let loops: Promise<void>[] = [];
let agent: Agent | undefined;
let sequence = 0;

// A webhook may come before the create's answer has been read: it waits here for its prediction's loop.
const waiting = new Map<string, (prediction: Prediction) => void>();
const early = new Map<string, Prediction>();
interface Prediction {
  id: string;
  status: string;
  output?: unknown;
}

function completed(prediction: Prediction): void {
  const resolve = waiting.get(prediction.id);
  if (resolve) {
    waiting.delete(prediction.id);
    resolve(prediction);
  } else {
    early.set(prediction.id, prediction);
  }
}

/** The prediction's terminal webhook, or a failure after WEBHOOK_WAIT_MS (a loop never waits forever). */
function webhookOf(id: string): Promise<Prediction> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiting.delete(id);
      resolve({ id, status: 'no webhook' });
    }, WEBHOOK_WAIT_MS);
    waiting.set(id, (prediction) => {
      clearTimeout(timer);
      resolve(prediction);
    });
  });
}

function verified(headers: http.IncomingHttpHeaders, body: Buffer): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string') return false;
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(Date.now() - Number(timestamp) * 1000) > TOLERANCE_MS) return false;
  const expected = createHmac('sha256', replicate.key).update(`${id}.${timestamp}.`).update(body).digest();
  return signatures.split(' ').some((candidate) => {
    if (!candidate.startsWith('v1,')) return false;
    const given = Buffer.from(candidate.slice(3), 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

async function readLimited(stream: AsyncIterable<Buffer>, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += chunk.length;
    if (size > max) throw new Error(`more than ${max} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function replicateJob(): Promise<boolean> {
  const body = JSON.stringify({
    version: replicate.version,
    input: { prompt: `bare ${++sequence}` },
    webhook: replicate.webhook,
    webhook_events_filter: ['completed'],
  });
  const res = await request(`${replicate.baseUrl}/predictions`, {
    method: 'POST',
    dispatcher: agent,
    body,
    headers: { authorization: `Bearer ${replicate.token}`, 'content-type': 'application/json', accept: 'application/json' },
  });
  const answer = JSON.parse((await readLimited(res.body, MAX_BODY_BYTES)).toString('utf8')) as Prediction;
  if (res.statusCode !== 201 || typeof answer.id !== 'string') return false;
  const done = early.get(answer.id) ?? (await webhookOf(answer.id));
  early.delete(answer.id);
  if (done.status !== 'succeeded' || !Array.isArray(done.output)) return false;
  for (const url of done.output) {
    const file = await request(String(url), { dispatcher: agent });
    const bytes = await readLimited(file.body, MAX_OUTPUT_BYTES);
    if (file.statusCode !== 200 || bytes.length === 0) return false;
  }
  return true;
}

async function openaiJob(): Promise<boolean> {
  const body = JSON.stringify({ model: openai.model, messages: [{ role: 'user', content: `Say hello in five words (${++sequence}).` }] });
  const res = await request(`${openai.baseUrl}/chat/completions`, {
    method: 'POST',
    dispatcher: agent,
    body,
    headers: { authorization: `Bearer ${openai.key}`, 'content-type': 'application/json', accept: 'application/json' },
  });
  const answer = JSON.parse((await readLimited(res.body, MAX_BODY_BYTES)).toString('utf8')) as { choices?: Array<{ message?: { content?: unknown } }> };
  return res.statusCode === 200 && typeof answer.choices?.[0]?.message?.content === 'string';
}

async function loop(job: () => Promise<boolean>): Promise<void> {
  while (running) {
    const started = Date.now();
    let ok = false;
    try {
      ok = await job();
    } catch {
      ok = false;
    }
    jobs.push([Date.now(), Date.now() - started, ok ? 1 : 0]);
  }
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://bare');
  const reply = (status: number, value?: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(value === undefined ? undefined : JSON.stringify(value));
  };
  readLimited(req, MAX_BODY_BYTES)
    .then(async (body) => {
      if (req.method === 'POST' && url.pathname === '/hooks/replicate') {
        if (!verified(req.headers, body)) return reply(400, { error: 'bad signature' });
        const prediction = JSON.parse(body.toString('utf8')) as Prediction;
        if (typeof prediction.id !== 'string') return reply(400, { error: 'not a prediction' });
        reply(200, { received: true });
        if (['succeeded', 'failed', 'canceled', 'aborted'].includes(prediction.status)) completed(prediction);
        return;
      }
      if (req.method === 'GET' && url.pathname === '/health/ready') return reply(200, { ready: true });
      if (req.method === 'POST' && url.pathname === '/control/start') {
        const kind = url.searchParams.get('kind');
        const concurrency = Number(url.searchParams.get('concurrency'));
        if (running || (kind !== 'replicate' && kind !== 'openai') || !(concurrency >= 1)) return reply(400, { error: 'bad start' });
        jobs = [];
        running = true;
        agent = new Agent({ connections: concurrency, keepAliveTimeout: 30_000 });
        loops = Array.from({ length: concurrency }, () => loop(kind === 'replicate' ? replicateJob : openaiJob));
        return reply(200, { started: concurrency });
      }
      if (req.method === 'POST' && url.pathname === '/control/stop') {
        running = false;
        await Promise.all(loops);
        await agent?.close();
        return reply(200, { jobs });
      }
      reply(404, { error: 'not found' });
    })
    .catch((error: unknown) => reply(500, { error: String(error) }));
});
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');
process.once('SIGTERM', () => {
  running = false;
  server.close(() => process.exit(0));
  server.closeAllConnections();
});

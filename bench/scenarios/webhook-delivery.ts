import { randomBytes } from 'node:crypto';
import { signatureHeader } from '../../actors/webhook/signature.ts';
import { Agent, request } from 'undici';
import { freePort, processCpuSeconds, startNodeServer, stopServer, waitUntilReady } from '../lib/processes.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario, ScenarioOutcome } from '../lib/types.ts';
import { scratchDatabase } from '../lib/postgres.ts';
import { signUp } from '../lib/accounts.ts';
import { measuredSummary } from '../lib/types.ts';

const WORKSPACES = 10;
/** Endpoints per workspace (the most a workspace may have), all subscribed to generation.completed. */
const ENDPOINTS = 20;
/** Generations per workspace per round: the free plan's limit of unfinished jobs (2 running × 10). */
const GENERATIONS = 20;
/** Measured rounds after the warm-up; the free plan's 100 credits cover the warm-up and these. */
const ROUNDS = 3;

function median<T extends Round>(rounds: T[]): T {
  return [...rounds].sort((a, b) => a.delivered / a.seconds - b.delivered / b.seconds)[Math.floor(rounds.length / 2)]!;
}

/**
 * Webhook deliveries of completed generations to a uWS receiver on loopback, against a bare undici loop
 * posting the same signed bodies to the same receiver. The receiver first holds each endpoint's first
 * delivery while the generations complete, so every other delivery waits, committed, in the database;
 * then it lets go, and the time until the last delivery arrives is the service's. Deliveries per second
 * = deliveries after the release ÷ that time. The bare loop runs one sequential loop per endpoint (the
 * service keeps one delivery in flight per endpoint), each signing and posting the same number of bodies.
 */
export const webhookDelivery: Scenario = {
  name: 'webhook-delivery',
  description: `webhook deliveries/s from completed generations (${WORKSPACES * ENDPOINTS} endpoints) to a uWS receiver vs a bare undici loop posting the same signed bodies`,
  run: (ctx) => measureDeliveries(ctx, ctx.serviceUrl, ctx.servicePid),
};

/** The same on PostgreSQL (a scratch database), as a production deployment runs. */
export const webhookDeliveryPostgres: Scenario = {
  name: 'webhook-delivery-postgres',
  description: `webhook-delivery with the service on PostgreSQL instead of the embedded PGlite`,
  async run(ctx) {
    const db = await scratchDatabase();
    let server: ExtraServer | undefined;
    try {
      server = await ctx.startService('service (PostgreSQL)', { DATABASE_URL: db.url });
      return await measureDeliveries(ctx, server.url, server.pid);
    } finally {
      await server?.stop();
      await db.drop();
    }
  },
};

/** A round: deliveries (or posts) made, the seconds they took, and the CPU seconds of the side that made them (undefined without /proc). */
interface Round {
  delivered: number;
  seconds: number;
  cpuSeconds: number | undefined;
}

async function measureDeliveries(ctx: BenchContext, serviceUrl: string, servicePid: number): Promise<ScenarioOutcome> {
  const port = await freePort();
  const receiver = startNodeServer('webhook receiver', 'bench/servers/webhook-receiver.ts', port, {});
  try {
    await waitUntilReady(receiver, '/', 30_000);
    const control = async (path: string, method = 'POST') =>
      (await fetch(`${receiver.url}/control/${path}`, { method })).json() as Promise<{ received: number; held: number; releasedAt: number; lastAt: number }>;
    const tenants = await Promise.all(Array.from({ length: WORKSPACES }, () => signUp(serviceUrl)));
    const endpoints: Array<{ url: string; secret: string }> = [];
    for (const [w, tenant] of tenants.entries()) {
      for (let e = 0; e < ENDPOINTS; e++) {
        const url = `${receiver.url}/hook/${w}-${e}`;
        const created = await json(serviceUrl, tenant.cookie, 'POST', '/v1/webhooks', {
          workspaceId: tenant.workspaceId,
          url,
          eventTypes: ['generation.completed'],
        });
        endpoints.push({ url, secret: created.secret });
      }
    }

    const serviceRound = async (label: string) => {
      await control('reset');
      await control('hold');
      const ids = await Promise.all(
        tenants.flatMap((tenant) =>
          Array.from({ length: GENERATIONS }, async () => ({
            tenant,
            id: (
              await json(serviceUrl, tenant.cookie, 'POST', '/v1/generations', {
                workspaceId: tenant.workspaceId,
                mode: 'text_to_text',
                model: 'local/text-mini',
                params: { prompt: 'bench' },
              })
            ).id as string,
          })),
        ),
      );
      await waitForCompletion(serviceUrl, tenants, ids.length);
      const expected = ids.length * ENDPOINTS;
      let stats = await until(
        async () => {
          const s = await control('stats', 'GET');
          return s.held === endpoints.length ? s : undefined;
        },
        'every endpoint has its first delivery on the wire',
        60_000,
      );
      // The service's CPU from the release until the last delivery is seen (read within 5 ms of it).
      const cpuBefore = processCpuSeconds(servicePid);
      await control('release');
      stats = await until(
        async () => {
          const s = await control('stats', 'GET');
          return s.received >= expected ? s : undefined;
        },
        `${expected} deliveries`,
        300_000,
      );
      const cpuAfter = processCpuSeconds(servicePid);
      const delivered = expected - endpoints.length;
      const seconds = (stats.lastAt - stats.releasedAt) / 1000;
      const cpuSeconds = cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore;
      ctx.log(
        `webhook-delivery ${label}: ${delivered} deliveries in ${seconds.toFixed(3)} s after the release = ${(delivered / seconds).toFixed(0)}/s${cpuNote({ delivered, seconds, cpuSeconds })}`,
      );
      return { delivered, seconds, cpuSeconds };
    };

    const bareRound = async (label: string, perEndpoint: number) => {
      await control('reset');
      const agent = new Agent({ connections: 64, keepAliveTimeout: 10_000 });
      const body = sampleBody();
      // This process's CPU: the bare loop is all it does meanwhile.
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      let errors = 0;
      await Promise.all(
        endpoints.map(async (endpoint) => {
          for (let i = 0; i < perEndpoint; i++) {
            const t = Math.floor(Date.now() / 1000);
            const res = await request(endpoint.url, {
              dispatcher: agent,
              method: 'POST',
              body,
              headers: {
                'content-type': 'application/json',
                'x-service-signature': signatureHeader(endpoint.secret, body, t),
                'x-service-event': 'generation.completed',
                'x-service-delivery': `dlv_${randomBytes(13).toString('hex')}`,
                traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`,
              },
            });
            await res.body.dump();
            if (res.statusCode < 200 || res.statusCode > 299) errors++;
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      const cpu = process.cpuUsage(cpuBefore);
      const cpuSeconds = (cpu.user + cpu.system) / 1e6;
      await agent.close();
      const delivered = endpoints.length * perEndpoint;
      ctx.log(
        `webhook-delivery ${label}: ${delivered} posts in ${seconds.toFixed(3)} s = ${(delivered / seconds).toFixed(0)}/s${cpuNote({ delivered, seconds, cpuSeconds })}`,
      );
      return { delivered, seconds, cpuSeconds, errors };
    };

    await serviceRound('service warm-up (discarded)');
    await bareRound('bare undici warm-up (discarded)', GENERATIONS - 1);
    // Rounds alternate, so both sides see the same machine; the median round of each is reported.
    const servedRounds: Round[] = [];
    const bareRounds: Array<Round & { errors: number }> = [];
    for (let round = 1; round <= ROUNDS; round++) {
      servedRounds.push(await serviceRound(`service round ${round}`));
      bareRounds.push(await bareRound(`bare undici round ${round}`, GENERATIONS - 1));
    }
    const served = median(servedRounds);
    const bare = median(bareRounds);
    return {
      result: summary('service: deliveries of completed generations', `${receiver.url}/hook/*`, served, 0, endpoints.length),
      baseline: summary('bare undici loop posting the same signed bodies', `${receiver.url}/hook/*`, bare, bare.errors, endpoints.length),
      target: 0.5,
      notes: [
        `${WORKSPACES} workspaces × ${ENDPOINTS} endpoints, ${GENERATIONS} generations per workspace per round; timed from the receiver's release of the held first deliveries to the last delivery; median of ${ROUNDS} rounds each`,
        `service rounds/s: ${servedRounds.map((r) => Math.round(r.delivered / r.seconds)).join(', ')}; bare rounds/s: ${bareRounds.map((r) => Math.round(r.delivered / r.seconds)).join(', ')}`,
        `CPU µs per delivery, service process from the release to the last delivery: ${servedRounds.map((r) => cpuPer(r) ?? '?').join(', ')}; per post, the bare loop's process: ${bareRounds.map((r) => cpuPer(r) ?? '?').join(', ')} (its "server CPU µs/req" column is that of the median round; the CPU ratio compares the two, whichever side waited on the other)`,
      ],
    };
  } finally {
    await stopServer(receiver);
  }
}

async function json(serviceUrl: string, cookie: string, method: string, pathname: string, body?: unknown): Promise<any> {
  const res = await fetch(`${serviceUrl}${pathname}`, {
    method,
    headers: { 'content-type': 'application/json', cookie },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${pathname}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function waitForCompletion(serviceUrl: string, tenants: Array<{ cookie: string; workspaceId: string }>, total: number): Promise<void> {
  await until(
    async () => {
      let active = 0;
      for (const tenant of tenants) {
        for (const status of ['queued', 'reserved', 'submitted', 'running']) {
          active += (await json(serviceUrl, tenant.cookie, 'GET', `/v1/generations?workspaceId=${tenant.workspaceId}&status=${status}&limit=100`)).data.length;
        }
      }
      return active === 0 ? true : undefined;
    },
    `${total} generations complete`,
    120_000,
  );
}

async function until<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`webhook-delivery: timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A body of the size and shape the service sends for a completed text generation. */
function sampleBody(): string {
  return JSON.stringify({
    id: `dlv_${randomBytes(13).toString('hex')}`,
    event: 'generation.completed',
    data: {
      generationId: `gen_${randomBytes(13).toString('hex')}`,
      workspaceId: `ws_${randomBytes(13).toString('hex')}`,
      mode: 'text_to_text',
      modelId: 'local/text-mini',
      status: 'succeeded',
      outputAssetIds: [],
      credits: 1,
      startedAt: new Date().toISOString(),
      completedAt: new Date().toISOString(),
    },
    createdAt: new Date().toISOString(),
  });
}

function cpuPer(round: Round): number | undefined {
  return round.cpuSeconds === undefined ? undefined : Math.round((round.cpuSeconds * 1e6) / round.delivered);
}

function cpuNote(round: Round): string {
  const us = cpuPer(round);
  return us === undefined ? '' : `, ${us} µs CPU each`;
}

function summary(title: string, url: string, measured: Round, errors: number, concurrency: number): LoadSummary {
  const round = (n: number) => Math.round(n * 100) / 100;
  const { delivered, seconds, cpuSeconds } = measured;
  return measuredSummary({
    title,
    url,
    method: 'POST',
    connections: concurrency,
    durationS: round(seconds),
    reqPerSec: round(seconds > 0 ? delivered / seconds : 0),
    totalRequests: delivered,
    latencyMs: { mean: 0, p50: 0, p90: 0, p99: 0, max: 0 },
    throughputBytesPerSec: 0,
    errors,
    serverCpuPercent: cpuSeconds === undefined || seconds <= 0 ? undefined : round((cpuSeconds / seconds) * 100),
    serverCpuUsPerRequest: cpuPer(measured),
  });
}

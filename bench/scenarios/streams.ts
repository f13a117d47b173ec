import net from 'node:net';
import { createKey, signUp } from '../lib/accounts.ts';
import { freePort, processRssBytes, startNodeServer, stopServer, waitUntilReady } from '../lib/processes.ts';
import { measuredSummary, type Scenario } from '../lib/types.ts';

/** Idle SSE streams held open (BENCH_STREAMS, default 10,000) and streams the fan-out goes to (BENCH_FANOUT_STREAMS, 1,000). */
const IDLE_STREAMS = Number(process.env.BENCH_STREAMS ?? 10_000);
const FANOUT_STREAMS = Number(process.env.BENCH_FANOUT_STREAMS ?? 1_000);
/** Generations of the fan-out: each makes 5 transitions. */
const JOBS = 10;
const OPEN_BATCH = 500;

interface Held {
  socket: net.Socket;
  /** Events counted (`event: transition`). */
  transitions: number;
  opened: boolean;
}

/** Opens a raw SSE stream and counts its `event: transition` frames (cheap enough to hold thousands in one process). */
function openStream(url: string, path: string, headers: Record<string, string>): Promise<Held> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const held: Held = { socket, transitions: 0, opened: false };
    let carry = '';
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => {
      const window = carry + text;
      let at = window.indexOf('event: transition');
      while (at >= 0) {
        held.transitions++;
        at = window.indexOf('event: transition', at + 1);
      }
      carry = window.slice(-16);
      if (!held.opened && window.includes('retry: ')) {
        held.opened = true;
        resolve(held);
      }
    });
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\n${Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join('')}\r\n`,
      );
    });
  });
}

async function openMany(count: number, open: () => Promise<Held>): Promise<Held[]> {
  const streams: Held[] = [];
  for (let i = 0; i < count; i += OPEN_BATCH) {
    streams.push(...(await Promise.all(Array.from({ length: Math.min(OPEN_BATCH, count - i) }, open))));
  }
  return streams;
}

async function settle(ms = 1_500): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

async function until(done: () => boolean, what: string, ms = 120_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function closeAll(streams: Held[]): void {
  for (const stream of streams) stream.socket.destroy();
}

/**
 * Live streams: memory per idle SSE stream, and events delivered per second to many streams, each against
 * raw uWS holding SSE responses in the same run (bench/servers/sse-uws.ts).
 */
export const streams: Scenario = {
  name: 'streams',
  description: `${IDLE_STREAMS} idle SSE streams (memory per stream) and a fan-out of ${JOBS} generations' transitions to ${FANOUT_STREAMS} streams, vs raw uWS SSE`,
  budgetS: 600,
  async run(ctx) {
    const notes: string[] = [];
    const service = await ctx.startService('streams', { STREAM_PING_MS: '600000', RATE_LIMIT_FREE: '1000000', LOCAL_PROVIDER_LATENCY_MS: '0' });
    const baselinePort = await freePort();
    const baseline = startNodeServer('raw uWS SSE', 'bench/servers/sse-uws.ts', baselinePort, {});
    try {
      await waitUntilReady(baseline, '/', 30_000);
      const idle = await signUp(service.url);
      const idleKey = await createKey(service.url, idle, ['generations.read']);
      const busy = await signUp(service.url);
      const busyKey = await createKey(service.url, busy, ['generations.read', 'generations.write']);

      // Memory per idle stream: RSS with the streams open minus RSS before, divided by their number.
      const measureIdle = async (name: string, pid: number, open: () => Promise<Held>) => {
        const warm = await openMany(100, open);
        closeAll(warm);
        await settle();
        const before = processRssBytes(pid) ?? 0;
        const started = Date.now();
        const held = await openMany(IDLE_STREAMS, open);
        const openS = (Date.now() - started) / 1000;
        await settle();
        const after = processRssBytes(pid) ?? 0;
        closeAll(held);
        const perStream = (after - before) / IDLE_STREAMS;
        ctx.log(
          `${name}: ${IDLE_STREAMS} streams open in ${openS.toFixed(1)} s, RSS ${(before / 1e6).toFixed(0)} → ${(after / 1e6).toFixed(0)} MB, ${(perStream / 1024).toFixed(1)} KiB per stream`,
        );
        return { perStream, openS, before, after };
      };
      const serviceIdle = await measureIdle('service', service.pid, () =>
        openStream(service.url, `/v1/events/stream?workspaceId=${idle.workspaceId}`, { authorization: `Bearer ${idleKey}` }),
      );
      const baselineIdle = await measureIdle('raw uWS', baseline.pid, () => openStream(baseline.url, '/sse', {}));
      await settle();

      // Fan-out: every transition of JOBS generations to FANOUT_STREAMS streams of the workspace.
      const fan = await openMany(FANOUT_STREAMS, () =>
        openStream(service.url, `/v1/events/stream?workspaceId=${busy.workspaceId}`, { authorization: `Bearer ${busyKey}` }),
      );
      const started = Date.now();
      const created = await Promise.all(
        Array.from({ length: JOBS }, async () => {
          const res = await fetch(`${service.url}/v1/generations`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${busyKey}` },
            body: JSON.stringify({ workspaceId: busy.workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'hello' } }),
          });
          if (res.status !== 201) throw new Error(`create: ${res.status} ${await res.text()}`);
          return ((await res.json()) as { id: string }).id;
        }),
      );
      const events = JOBS * 5;
      await until(() => fan.every((s) => s.transitions >= events), 'the service fan-out');
      const serviceS = (Date.now() - started) / 1000;
      closeAll(fan);
      const sample = await (
        await fetch(`${service.url}/v1/generations/${created[0]}?workspaceId=${busy.workspaceId}`, { headers: { authorization: `Bearer ${busyKey}` } })
      ).text();
      const body = `id: ${created[0]}.4\nevent: transition\ndata: ${JSON.stringify({ generationId: created[0], seq: 4, status: 'succeeded', at: new Date().toISOString(), mode: 'text_to_text', project: null, generation: JSON.parse(sample) })}\n\n`;
      await settle();

      const rawFan = await openMany(FANOUT_STREAMS, () => openStream(baseline.url, '/sse', {}));
      const rawStarted = Date.now();
      await fetch(`${baseline.url}/publish?count=${events}`, { method: 'POST', body });
      await until(() => rawFan.every((s) => s.transitions >= events), 'the raw fan-out');
      const rawS = (Date.now() - rawStarted) / 1000;
      closeAll(rawFan);

      const deliveries = FANOUT_STREAMS * events;
      const serviceRate = deliveries / serviceS;
      const rawRate = deliveries / rawS;
      notes.push(
        `idle streams: ${IDLE_STREAMS} each; memory per stream ${(serviceIdle.perStream / 1024).toFixed(1)} KiB on the service (RSS ${(serviceIdle.before / 1e6).toFixed(0)} → ${(serviceIdle.after / 1e6).toFixed(0)} MB, opened in ${serviceIdle.openS.toFixed(1)} s) vs ${(baselineIdle.perStream / 1024).toFixed(1)} KiB on raw uWS (opened in ${baselineIdle.openS.toFixed(1)} s): ratio ${(serviceIdle.perStream / Math.max(1, baselineIdle.perStream)).toFixed(1)}`,
        `fan-out: ${events} transitions × ${FANOUT_STREAMS} streams = ${deliveries} deliveries of ~${body.length} bytes; service ${serviceRate.toFixed(0)}/s (from the first create to the last delivery: ${serviceS.toFixed(2)} s, jobs run included), raw uWS ${rawRate.toFixed(0)}/s (${rawS.toFixed(2)} s); the one client process that counts every event bounds both`,
      );
      const result = measuredSummary({
        title: 'service SSE fan-out (deliveries/s)',
        url: `${service.url}/v1/events/stream`,
        method: 'GET',
        connections: FANOUT_STREAMS,
        durationS: serviceS,
        reqPerSec: serviceRate,
        totalRequests: deliveries,
      });
      const base = measuredSummary({
        title: 'raw uWS SSE fan-out (deliveries/s)',
        url: `${baseline.url}/sse`,
        method: 'GET',
        connections: FANOUT_STREAMS,
        durationS: rawS,
        reqPerSec: rawRate,
        totalRequests: deliveries,
      });
      return { result, baseline: base, notes };
    } finally {
      await stopServer(baseline);
      await service.stop();
    }
  },
};

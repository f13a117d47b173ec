import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';
import { eventually as pollUntil } from '../helpers/eventually.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey, type SignedUp } from '../helpers/identity.ts';

export interface Received {
  headers: http.IncomingHttpHeaders;
  rawBody: Buffer;
  body: any;
}

/** What the receiver does with one request: answer a status, or hold it until `release` (or the socket closes). */
export type Behaviour = { status: number } | { hold: true };

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Requests held open, oldest first; each `release(status)` answers one. */
  held: Array<{ delivery: string; release(status?: number): void }>;
  /** How the next requests are answered (a function of the request's index, from 0); default 200. */
  behave(fn: (index: number, request: Received) => Behaviour): void;
  /** Resolves once at least n requests have arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

/** A real HTTP receiver on loopback that records every delivery with its raw body. */
export async function startReceiver(t: Test, port = 0): Promise<Receiver> {
  const received: Received[] = [];
  const held: Receiver['held'] = [];
  let behaviour: (index: number, request: Received) => Behaviour = () => ({ status: 200 });
  const waiters = new Set<() => void>();
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      let body: unknown;
      try {
        body = JSON.parse(rawBody.toString('utf8'));
      } catch {
        body = undefined;
      }
      const request: Received = { headers: req.headers, rawBody, body };
      const index = received.length;
      received.push(request);
      const action = behaviour(index, request);
      if ('hold' in action) {
        held.push({
          delivery: String(req.headers['x-service-delivery']),
          release: (status = 200) => {
            res.writeHead(status).end('ok');
          },
        });
      } else {
        res.writeHead(action.status, { 'content-type': 'text/plain' }).end(action.status < 300 ? 'ok' : 'no');
      }
      for (const wake of [...waiters]) wake();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  t.teardown(close);
  return {
    url: `http://127.0.0.1:${address.port}/hook`,
    port: address.port,
    received,
    held,
    behave(fn) {
      behaviour = fn;
    },
    waitFor(n, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (received.length >= n) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(received);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`the receiver got ${received.length} requests, not ${n}, within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close,
  };
}

/** Polls `probe` until it returns a value that is not undefined (a state reached through the API or the database). */
export function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  return pollUntil(probe, { what, timeoutMs, everyMs: 20 }) as Promise<T>;
}

export interface Tenant extends SignedUp {
  key: string;
}

export async function tenant(server: TestServer): Promise<Tenant> {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  return { ...user, key };
}

export async function createEndpoint(
  server: TestServer,
  who: Tenant,
  url: string,
  eventTypes: string[] = ['generation.completed', 'generation.failed', 'generation.cancelled', 'generation.expired'],
): Promise<{ id: string; secret: string }> {
  const response = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, url, eventTypes }),
  });
  if (response.status !== 201) throw new Error(`endpoint creation failed: ${response.status} ${JSON.stringify(response.body)}`);
  return { id: response.body.id, secret: response.body.secret };
}

export async function createGeneration(server: TestServer, who: Tenant, prompt = 'hello'): Promise<{ id: string; status: string }> {
  const response = await server.json('/v1/generations', {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt } }),
  });
  if (response.status !== 201) throw new Error(`generation creation failed: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body;
}

export async function cancelGeneration(server: TestServer, who: Tenant, id: string): Promise<void> {
  const response = await server.json(`/v1/generations/${id}/cancel?workspaceId=${who.workspaceId}`, { method: 'POST', headers: withKey(who.key) });
  if (response.status !== 200) throw new Error(`cancel failed: ${response.status} ${JSON.stringify(response.body)}`);
}

export async function getGeneration(server: TestServer, who: Tenant, id: string): Promise<any> {
  return (await server.json(`/v1/generations/${id}?workspaceId=${who.workspaceId}`, { headers: withKey(who.key) })).body;
}

export async function deliveries(server: TestServer, who: Tenant, endpointId: string, query = ''): Promise<{ data: any[]; nextCursor: string | null }> {
  const response = await server.json(`/v1/webhooks/${endpointId}/deliveries?workspaceId=${who.workspaceId}${query}`, { headers: withKey(who.key) });
  if (response.status !== 200) throw new Error(`deliveries: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body;
}

/** Waits until the endpoint's delivery history satisfies `done`; returns it. */
export function historyWhen(server: TestServer, who: Tenant, endpointId: string, done: (data: any[]) => boolean, what: string): Promise<any[]> {
  return eventually(async () => {
    const { data } = await deliveries(server, who, endpointId);
    return done(data) ? data : undefined;
  }, what);
}

/**
 * A server on a manual clock whose jobs stay with the provider for ten minutes of it, so each event is a
 * cancellation made when the test says (cancelledEvent); with a tenant holding a key.
 */
export async function startOnManualClock(t: Test, env: Record<string, string> = {}): Promise<{ clock: ManualClock; server: TestServer; who: Tenant }> {
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, { clock, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000', ...env } });
  return { clock, server, who: await tenant(server) };
}

/** Creates a job and cancels it: its generation.cancelled event is made now. Returns the generation's id. */
export async function cancelledEvent(server: TestServer, who: Tenant): Promise<string> {
  const created = await createGeneration(server, who);
  await cancelGeneration(server, who, created.id);
  return created.id;
}

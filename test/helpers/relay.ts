import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { request } from 'undici';
import type { Test } from 'tap';

/** Headers of one connection, not relayed. */
const HOP = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'content-length', 'upgrade', 'te', 'trailer']);

export interface Relay {
  /** Where the relay listens: stands for the address the other side knows. */
  url: string;
  /** The base URL requests go on to; undefined: nothing is there (503 with Retry-After, as a load balancer says). */
  target: string | undefined;
  /** Requests matching it are sent on, but their answer never comes back (the caller waits, as after a lost packet). */
  swallow: ((method: string, path: string) => boolean) | undefined;
  /** Every request: method, path and query, and what the caller got (0: nothing). */
  seen: Array<{ method: string; path: string; status: number }>;
  close(): Promise<void>;
}

/**
 * A fixed address in front of a server that comes and goes: the public address of a service restarted on
 * another port, or a network path to a provider that loses an answer. Closed when `t` ends.
 */
export async function startRelay(t: Test, target?: string): Promise<Relay> {
  const sockets = new Set<Socket>();
  const relay: Relay = {
    url: '',
    target,
    swallow: undefined,
    seen: [],
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((req, res) => {
    void pass(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(502).end();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function pass(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const method = req.method ?? 'GET';
    const path = req.url ?? '/';
    const seen = { method, path, status: 0 };
    relay.seen.push(seen);
    if (relay.target === undefined) {
      seen.status = 503;
      res.writeHead(503, { 'retry-after': '1', 'content-length': 0 }).end();
      return;
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers))
      if (!HOP.has(name) && value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    const answer = await request(`${relay.target}${path}`, { method: method as 'GET', headers, body: chunks.length > 0 ? Buffer.concat(chunks) : undefined });
    const body = Buffer.from(await answer.body.arrayBuffer());
    if (relay.swallow?.(method, path)) return;
    seen.status = answer.statusCode;
    const out: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers)) if (!HOP.has(name) && value !== undefined) out[name] = value;
    res.writeHead(answer.statusCode, { ...out, 'content-length': body.length }).end(body);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  relay.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(() => relay.close());
  return relay;
}

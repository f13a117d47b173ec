import net from 'node:net';
import type { Test } from 'tap';

/**
 * A TCP proxy in front of a PostgreSQL server that can fail the way a network or a server does: refuse
 * every connection (`down`), or cut a connection at a chosen statement (`cutAt`), before the statement
 * reaches the server or after the server has answered it. It reads the frontend protocol's message
 * framing to find the statements (simple Query and Parse messages); everything else passes through.
 */
export interface PgProxy {
  /** `postgres://` URL of the proxy, with the upstream's user, password and database. */
  url: string;
  /** While true, new connections are refused and open ones are cut. */
  down(value: boolean): void;
  /**
   * Cuts the connection that sends the next statement matching `pattern`: `before` it reaches the server,
   * or `after` the server has answered it (its effect is then made, but the client never hears of it).
   */
  cutAt(pattern: RegExp, when: 'before' | 'after'): Promise<void>;
  /** Connections cut so far. */
  cuts: number;
}

export async function startPgProxy(t: Test, upstreamUrl: string): Promise<PgProxy> {
  const upstream = new URL(upstreamUrl);
  const sockets = new Set<net.Socket>();
  let isDown = false;
  let armed: { pattern: RegExp; when: 'before' | 'after'; done: () => void } | undefined;
  const proxy: PgProxy = {
    url: '',
    cuts: 0,
    down(value) {
      isDown = value;
      if (value) for (const socket of sockets) socket.destroy();
    },
    cutAt(pattern, when) {
      return new Promise((resolve) => {
        armed = { pattern, when, done: resolve };
      });
    },
  };

  const server = net.createServer((client) => {
    if (isDown) {
      client.destroy();
      return;
    }
    const server = net.connect(Number(upstream.port || 5432), upstream.hostname);
    sockets.add(client);
    sockets.add(server);
    const cut = () => {
      proxy.cuts++;
      client.destroy();
      server.destroy();
    };
    client.on('close', () => {
      sockets.delete(client);
      server.destroy();
    });
    server.on('close', () => {
      sockets.delete(server);
      client.destroy();
    });
    client.on('error', () => {});
    server.on('error', () => {});
    let cutOnAnswer: (() => void) | undefined;
    server.on('data', (chunk: Buffer) => {
      if (cutOnAnswer) {
        const done = cutOnAnswer;
        cutOnAnswer = undefined;
        cut();
        done();
        return;
      }
      client.write(chunk);
    });

    // The first message (startup) has no type byte; every later one is a type byte, a length, a payload.
    let started = false;
    let pending = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const header = started ? 5 : 4;
        if (pending.length < header) return;
        const length = started ? pending.readInt32BE(1) + 1 : pending.readInt32BE(0);
        if (pending.length < length) return;
        const message = pending.subarray(0, length);
        pending = pending.subarray(length);
        const wasStarted = started;
        // An SSLRequest or a startup message; only the startup (protocol 3.0) ends the untyped part.
        if (!started && message.readInt32BE(4) === 196608) started = true;
        const type = wasStarted ? String.fromCharCode(message[0]!) : '';
        const sql = type === 'Q' ? message.subarray(5).toString('utf8') : type === 'P' ? statementOfParse(message) : undefined;
        if (armed && sql !== undefined && armed.pattern.test(sql)) {
          const { when, done } = armed;
          armed = undefined;
          if (when === 'before') {
            cut();
            done();
            return;
          }
          cutOnAnswer = done;
        }
        server.write(message);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const url = new URL(upstreamUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  proxy.url = url.toString();
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return proxy;
}

/** The SQL of a Parse message: type, length, a NUL-terminated statement name, then the NUL-terminated query. */
function statementOfParse(message: Buffer): string {
  const nameEnd = message.indexOf(0, 5);
  const queryEnd = message.indexOf(0, nameEnd + 1);
  return message.subarray(nameEnd + 1, queryEnd).toString('utf8');
}

// The baseline of the `streams` scenario: raw uWebSockets.js holding Server-Sent Events responses.
// GET /sse holds a response (the same head as the service's); POST /publish?count=N writes its body N times
// to every held response, each write corked, as fast as the process can; GET / answers 200 (readiness).
// Started in its own process (env HOST, PORT); prints one "ready" JSON line on stdout.
import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

const require = createRequire(import.meta.url);
const uws = require('uWebSockets.js') as typeof UWS;

const host = process.env.HOST ?? '127.0.0.1';
const port = Number(process.env.PORT ?? 0);
const held = new Set<UWS.HttpResponse>();

let listenSocket: UWS.us_listen_socket | undefined;
uws
  .App()
  .get('/', (res) => {
    res.cork(() => res.end(JSON.stringify({ streams: held.size })));
  })
  .get('/sse', (res) => {
    held.add(res);
    res.onAborted(() => held.delete(res));
    res.cork(() => {
      res.writeStatus('200 OK');
      res.writeHeader('Content-Type', 'text/event-stream; charset=utf-8');
      res.writeHeader('Cache-Control', 'no-cache, no-transform');
      res.write('retry: 2000\n\n');
    });
  })
  .post('/publish', (res, req) => {
    const count = Number(new URLSearchParams(req.getQuery() ?? '').get('count') ?? '1');
    const chunks: Buffer[] = [];
    res.onAborted(() => {});
    res.onData((chunk, last) => {
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (!last) return;
      const event = Buffer.concat(chunks).toString('utf8');
      for (let i = 0; i < count; i++) {
        for (const stream of held) stream.cork(() => stream.write(event));
      }
      res.cork(() => res.end('{}'));
    });
  })
  .listen(host, port, (socket) => {
    if (!socket) {
      process.stderr.write(`sse-uws: could not listen on ${host}:${port}\n`);
      process.exit(1);
    }
    listenSocket = socket;
    process.stdout.write(`${JSON.stringify({ ready: true, port: uws.us_socket_local_port(socket) })}\n`);
  });

const stop = () => {
  if (listenSocket) uws.us_listen_socket_close(listenSocket);
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

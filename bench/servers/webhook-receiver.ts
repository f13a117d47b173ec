// A webhook receiver on raw uWebSockets.js for the webhook-delivery scenario (env HOST, PORT). POST /hook/*
// reads the body and answers 204, or parks the request while holding; the harness drives it over HTTP:
// POST /control/hold, POST /control/release (answers every parked request), POST /control/reset,
// GET /control/stats -> { received, held, releasedAt, lastAt } (times: performance.now() of this process).
import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

const require = createRequire(import.meta.url);
const uws = require('uWebSockets.js') as typeof UWS;

const host = process.env.HOST ?? '127.0.0.1';
const port = Number(process.env.PORT ?? 0);

let holding = false;
let received = 0;
let releasedAt = 0;
let lastAt = 0;
const parked: Array<{ res: UWS.HttpResponse; aborted: boolean }> = [];

function answer(res: UWS.HttpResponse): void {
  res.cork(() => res.writeStatus('204 No Content').end());
}

let listenSocket: UWS.us_listen_socket | undefined;
uws
  .App()
  .post('/hook/*', (res) => {
    const entry = { res, aborted: false };
    res.onAborted(() => {
      entry.aborted = true;
    });
    let _size = 0;
    res.onData((chunk, isLast) => {
      _size += chunk.byteLength;
      if (!isLast) return;
      received++;
      lastAt = performance.now();
      if (holding) parked.push(entry);
      else if (!entry.aborted) answer(res);
    });
  })
  .post('/control/hold', (res) => {
    holding = true;
    res.end('{}');
  })
  .post('/control/release', (res) => {
    holding = false;
    releasedAt = performance.now();
    for (const entry of parked.splice(0)) if (!entry.aborted) answer(entry.res);
    res.end('{}');
  })
  .post('/control/reset', (res) => {
    received = 0;
    releasedAt = 0;
    lastAt = 0;
    res.end('{}');
  })
  .get('/control/stats', (res) => {
    res.cork(() => {
      res.writeHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ received, held: parked.length, releasedAt, lastAt }));
    });
  })
  .get('/', (res) => {
    res.end('{}');
  })
  .any('/*', (res) => {
    res.cork(() => res.writeStatus('404 Not Found').end());
  })
  .listen(host, port, (socket) => {
    if (!socket) {
      process.stderr.write(`webhook-receiver: could not listen on ${host}:${port}\n`);
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

// The baseline: the smallest useful uWebSockets.js server, answering GET / with a tiny JSON body.
// Started by bench/run.ts in its own process (env HOST, PORT); prints one "ready" JSON line on stdout.
import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

const require = createRequire(import.meta.url);
const uws = require('uWebSockets.js') as typeof UWS;
const engine = Object.keys(require.cache).some((file) => /[\\/]uWebSockets\.js[\\/]binaries[\\/]uws_[^\\/]+\.node$/.test(file)) ? 'uws-native' : 'uws-fallback';

const host = process.env.HOST ?? '127.0.0.1';
const port = Number(process.env.PORT ?? 0);
const body = JSON.stringify({ hello: 'world' });

let listenSocket: UWS.us_listen_socket | undefined;
uws
  .App()
  .get('/', (res) => {
    res.cork(() => {
      res.writeHeader('Content-Type', 'application/json');
      res.end(body);
    });
  })
  .any('/*', (res) => {
    res.cork(() => res.writeStatus('404 Not Found').end());
  })
  .listen(host, port, (socket) => {
    if (!socket) {
      process.stderr.write(`hello-uws: could not listen on ${host}:${port}\n`);
      process.exit(1);
    }
    listenSocket = socket;
    process.stdout.write(`${JSON.stringify({ ready: true, port: uws.us_socket_local_port(socket), engine })}\n`);
  });

const stop = () => {
  if (listenSocket) uws.us_listen_socket_close(listenSocket);
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

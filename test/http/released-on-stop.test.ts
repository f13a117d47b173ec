import v8 from 'node:v8';
import vm from 'node:vm';
import t from 'tap';
import WebSocket from 'ws';
import { startTestServer } from '../helpers/server.ts';
import { eventually } from '../helpers/eventually.ts';

// The native uWS app keeps the handlers it was given for the life of the process: a stopped server must
// let go of them (http/handler-lease.ts), or its services, database and PGlite (some 450 MB each) stay in
// memory for as long as the process runs, as they did in a group of test files (test/groups/).
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

class Marker {}

t.test('a stopped server, its HTTP and WebSocket handlers used, is collected', async (t) => {
  // Made inside the subtest, so that no closure tap keeps (its call sites) holds it.
  let marker: WeakRef<Marker> | undefined;
  await t.test('a server that answered and held a WebSocket', async (t) => {
    const server = await startTestServer(t);
    const held = new Marker();
    (server.services as unknown as Record<string, unknown>).marker = held;
    marker = new WeakRef(held);
    t.equal((await server.fetch('/health/live')).status, 200);
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/ws`);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const answered = new Promise<void>((resolve) => ws.once('message', () => resolve()));
    ws.send('{"type":"nonsense"}');
    await answered;
    ws.close();
    await new Promise<void>((resolve) => ws.once('close', () => resolve()));
  });
  const collected = await eventually(
    async () => {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 20));
      return marker?.deref() === undefined;
    },
    { timeoutMs: 10_000, what: "the stopped server's services collected" },
  );
  t.ok(collected, "nothing keeps the stopped server's services");
});

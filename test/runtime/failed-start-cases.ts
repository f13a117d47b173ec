import net from 'node:net';
import type { Test } from 'tap';
import { freePort } from '../helpers/ports.ts';

// A start that fails half-way releases exactly what it built, whatever the step it failed at: two failures
// after the database opened, one at the last step (the metrics listener, once everything else is built and
// the public port listens) and one early (Redis, just after the database, the metrics and the writer).

/** A port held by this test for as long as it runs. */
async function busyPort(t: Test): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

export const failedStarts = [
  {
    name: 'the metrics listener cannot open (the last step)',
    env: async (t: Test) => ({ METRICS_PORT: String(await busyPort(t)) }),
    message: /METRICS_HOST:METRICS_PORT, the metrics endpoint\): is the port in use\?/,
  },
  {
    name: 'Redis cannot be reached (an early step)',
    env: async () => ({ REDIS_URL: `redis://127.0.0.1:${await freePort()}` }),
    message: /^Redis \(REDIS_URL\): /,
  },
];

import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { loadConfig } from '../../runtime/config.ts';
import { startService, StartupError } from '../../app/service.ts';
import { freshDatabaseUrl, migratedPglite } from '../helpers/database.ts';
import { startNode } from '../fixtures/child.ts';

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

/** A port free now (nothing listens on it once this returns). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Whether this process can listen on the port (nothing holds it). */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** The sessions open on a Postgres database, other than the asker's, once they have had up to 5 s to end. */
async function sessionsOn(url: string): Promise<number> {
  const name = new URL(url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await admin.connect();
  try {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const { rows } = await admin.query<{ n: string }>('select count(*) as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
      const n = Number(rows[0]!.n);
      if (n === 0 || Date.now() > deadline) return n;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await admin.end();
  }
}

const failures = [
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

for (const failure of failures) {
  t.test(`a start that fails because ${failure.name} closes the database and frees the port`, async (t) => {
    const database = await freshDatabaseUrl();
    t.teardown(() => database.drop());
    const port = await freePort();
    const config = loadConfig({
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      DATABASE_URL: database.url,
      DATA_DIR: '.data/test',
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: '0',
      ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: `test:failed-start:${process.pid}:` } : {}),
      ...(await failure.env(t)),
    });
    const pglite: PGlite | undefined = config.databaseUrl === 'memory://' ? await migratedPglite() : undefined;
    const error = await startService({ config, pglite }).then(
      async (service) => {
        await service.stop();
        return undefined;
      },
      (e: unknown) => e,
    );
    t.type(error, StartupError, 'the start fails');
    t.match((error as Error).message, failure.message);
    if (pglite) t.ok(pglite.closed, 'the database (PGlite) is closed');
    else t.equal(await sessionsOn(database.url), 0, 'no connection to the database is left open');
    t.ok(await canListen(port), 'the public port is free again');
  });

  t.test(`a start that fails because ${failure.name} leaves nothing holding the process: it ends by itself`, async (t) => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-failed-start-'));
    t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
    const database = process.env.TEST_DATABASE_URL ? await freshDatabaseUrl() : undefined;
    if (database) t.teardown(() => database.drop());
    const child = startNode(t, 'test/fixtures/start-fails.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      DATA_DIR: dataDir,
      DATABASE_URL: database?.url,
      METRICS_HOST: '127.0.0.1',
      ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: `test:failed-start:${process.pid}:` } : {}),
      ...(await failure.env(t)),
    });
    const [, message] = await child.line(/^start failed: (.*)$/, 60_000);
    t.match(message, failure.message);
    // The start failed; the fixture does not call process.exit. Any connection, listener or timer it left
    // open would keep the process alive past this bound (generous, for a loaded machine).
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      child.exited,
      new Promise<'still running'>((resolve) => {
        timer = setTimeout(() => resolve('still running'), 30_000);
      }),
    ]);
    clearTimeout(timer);
    t.same(outcome, { code: 0, signal: null }, 'the process ended by itself');
    t.equal(child.stderr().trim(), '', 'nothing on stderr');
  });
}

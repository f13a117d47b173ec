import net from 'node:net';
import t from 'tap';
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { loadConfig } from '../../runtime/config.ts';
import { startService, StartupError } from '../../app/service.ts';
import { freshDatabaseUrl, migratedPglite, pgliteClosed } from '../helpers/database.ts';
import { freePort } from '../helpers/ports.ts';
import { failedStarts } from './failed-start-cases.ts';

// In process: what the failed start opened is closed when startService rejects. The process-level check
// (nothing left keeps it alive) is failed-start-exit.test.ts.

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

for (const failure of failedStarts) {
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
    if (pglite) t.ok(pgliteClosed(pglite), 'the database (PGlite) is closed');
    else t.equal(await sessionsOn(database.url), 0, 'no connection to the database is left open');
    t.ok(await canListen(port), 'the public port is free again');
  });
}

import t from 'tap';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { startPgProxy } from '../helpers/pg-proxy.ts';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { metricValue } from '../catalog/support.ts';

/**
 * gs_db_available, what the GenerationServiceDatabaseUnavailable alert reads (deploy/prometheus/alerts.yaml):
 * 1 while the node reaches PostgreSQL, 0 once a request met the lost database, 1 again when it is back. Needs
 * a PostgreSQL server to put a proxy in front of (PGlite runs in the process and has no outage).
 */
const skip = process.env.TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL (PGlite has no connection to lose)';

t.test('gs_db_available follows an outage of the database', { skip }, async (t) => {
  const fresh = await freshDatabaseUrl();
  t.teardown(() => fresh.drop());
  const front = await startPgProxy(t, fresh.url);
  const server = await startTestServer(t, { databaseUrl: front.url });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.read']);
  const read = () => server.json(`/v1/generations?workspaceId=${user.workspaceId}`, { headers: { authorization: `Bearer ${key}` } });
  const available = () => metricValue(server.metricsUrl!, 'gs_db_available');
  t.equal(await available(), 1, 'reachable: 1');

  front.down(true);
  t.equal((await read()).status, 503, 'a read meets the lost database');
  t.equal(await available(), 0, 'unreachable: 0');

  front.down(false);
  let status = 0;
  for (let i = 0; i < 500 && status !== 200; i++) {
    status = (await read()).status;
    if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.equal(status, 200, 'the database is back');
  t.equal(await available(), 1, 'reachable again: 1');
});

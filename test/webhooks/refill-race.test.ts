import t from 'tap';
import pg from 'pg';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { startTestServer } from '../helpers/server.ts';
import { cancelGeneration, createEndpoint, createGeneration, eventually, startReceiver, tenant } from './support.ts';

/**
 * An endpoint actor reads its pending deliveries again when its queue runs dry. A delivery just answered
 * 2xx is then being written `delivered`: a read that began before that write committed finds it still
 * pending, and that write may commit before the read's rows come back. The delivery must not be queued,
 * and posted, a second time. Only PostgreSQL has concurrent transactions; PGlite runs one at a time.
 */
const ONLY_POSTGRES = { skip: process.env.TEST_DATABASE_URL ? false : 'PostgreSQL only (TEST_DATABASE_URL): PGlite runs one transaction at a time' };

t.test('a delivery whose outcome commits while its endpoint reads its pending deliveries is not posted again', ONLY_POSTGRES, async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const who = await tenant(server);
  const receiver = await startReceiver(t);
  receiver.behave((index) => (index === 0 ? { hold: true } : { status: 200 }));
  const endpoint = await createEndpoint(server, who, receiver.url, ['generation.cancelled']);
  const side = new pg.Client({ connectionString: server.config.databaseUrl });
  await side.connect();
  t.teardown(() => side.end());
  const statusOf = async (id: string) => (await side.query<{ status: string }>('select status from webhook_deliveries where id = $1', [id])).rows[0]?.status;

  // The endpoint's reads of its pending deliveries, once armed: each held, after it ran, until released.
  const db = server.services.db;
  const em = db.em;
  let armed = false;
  let readRan!: () => void;
  const ran = new Promise<void>((resolve) => {
    readRan = resolve;
  });
  let releaseRead!: () => void;
  const released = new Promise<void>((resolve) => {
    releaseRead = resolve;
  });
  db.em = () => {
    const real = em();
    return new Proxy(real, {
      get(target, name) {
        const value = Reflect.get(target, name);
        if (name !== 'execute') return typeof value === 'function' ? value.bind(target) : value;
        return async (sql: string, ...rest: unknown[]) => {
          const result = await (value as (...args: unknown[]) => Promise<unknown>).call(target, sql, ...rest);
          if (armed && /status = 'pending' order by/.test(sql)) {
            readRan();
            await released;
          }
          return result;
        };
      },
    }) as SqlEntityManager;
  };
  t.teardown(() => {
    db.em = em;
  });

  // A delivery, held by the receiver until its row is locked: its `delivered` write then waits on the lock.
  const generation = await createGeneration(server, who);
  await cancelGeneration(server, who, generation.id);
  const held = await eventually(async () => receiver.held[0], 'the delivery posted and held');
  await side.query('begin');
  await side.query('select id from webhook_deliveries where id = $1 for update', [held.delivery]);
  armed = true;
  held.release(200);
  await eventually(async () => {
    const { rows } = await side.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`);
    return rows[0].n > 0 ? true : undefined;
  }, 'the delivered write waits on the lock');

  // The endpoint reads its pending deliveries now: the delivery is still pending there.
  server.services.actors.tell('whk', endpoint.id, { type: 'wake' });
  await ran;
  await side.query('commit');
  await eventually(async () => ((await statusOf(held.delivery)) === 'delivered' ? true : undefined), 'the delivered write committed');
  // Its commit's callbacks run before the read's rows come back.
  await new Promise((resolve) => setTimeout(resolve, 200));
  armed = false;
  releaseRead();

  // Anything posted again would arrive meanwhile.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const posts = receiver.received.filter((r) => r.headers['x-service-delivery'] === held.delivery).length;
  t.equal(posts, 1, 'the delivery was posted once');
  t.equal(await statusOf(held.delivery), 'delivered');
});

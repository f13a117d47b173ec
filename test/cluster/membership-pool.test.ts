import t from 'tap';
import { clusterDatabase, clusterEnv, eventually, freePort, NEEDS_POSTGRES_REDIS, sleep } from './support.ts';
import { startTestServer } from '../helpers/server.ts';

/**
 * A node's heartbeats and lease renewals go through connections of their own: while every connection of
 * the service's pool is busy (a shard just gained loads thousands of actors, say), the node keeps
 * heartbeating, so the others do not declare it dead and take its shards.
 */
t.test('the cluster node heartbeats while the service pool is exhausted', { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const db = await clusterDatabase(t);
  const server = await startTestServer(t, {
    databaseUrl: db.url,
    env: {
      ...clusterEnv(db.url, 8),
      CLUSTER: 'true',
      CLUSTER_NODE_ID: 'solo',
      CLUSTER_INTERNAL_ADDRESS: '127.0.0.1',
      CLUSTER_INTERNAL_PORT: String(await freePort()),
      LOG_LEVEL: 'silent',
    },
  });
  await server.recovered;
  const heartbeatAt = async () => {
    const [row] = await db.em().execute<Array<{ at: Date | string }>>(`select heartbeat_at as at from cluster_members where node_id = 'solo'`);
    return row ? new Date(row.at).getTime() : undefined;
  };
  await eventually('the node to be up', heartbeatAt);

  // Twice as many sleeps as the service pool has connections (10): it stays exhausted for about four seconds.
  let blocked = true;
  const sleeps = Promise.all(Array.from({ length: 20 }, () => server.services.db.em().execute('select pg_sleep(2)'))).finally(() => {
    blocked = false;
  });
  await sleep(300);
  const seen = new Set<number>();
  while (blocked) {
    const at = await heartbeatAt();
    if (at !== undefined && blocked) seen.add(at);
    await sleep(100);
  }
  await sleeps;
  t.ok(seen.size >= 3, `the heartbeat moved on while the pool was exhausted (${seen.size} distinct heartbeats seen)`);
  const [member] = await db.em().execute<Array<{ status: string }>>(`select status from cluster_members where node_id = 'solo'`);
  t.equal(member?.status, 'up', 'the node was never declared dead');
});

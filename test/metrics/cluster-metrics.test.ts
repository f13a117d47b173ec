import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { clusterDatabase, clusterEnv, eventually, freePort, NEEDS_POSTGRES_REDIS } from '../cluster/support.ts';

const SHARDS = 8;

/** The value of one sample of the node's /metrics (the first line of that name with those labels). */
async function sample(server: TestServer, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await fetch(server.metricsUrl!)).text();
  const line = text.split('\n').find((l) => l.startsWith(labels ? `${name}{` : `${name} `) && l.includes(labels));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

t.test('cluster mode: shards owned per node, and the shards gained and handed over', { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const db = await clusterDatabase(t);
  const env = clusterEnv(db.url, SHARDS);
  const node = async (id: string) =>
    startTestServer(t, {
      databaseUrl: db.url,
      env: {
        ...env,
        CLUSTER: 'true',
        CLUSTER_NODE_ID: id,
        CLUSTER_INTERNAL_ADDRESS: '127.0.0.1',
        CLUSTER_INTERNAL_PORT: String(await freePort()),
        LOG_LEVEL: 'silent',
      },
    });
  const a = await node('metrics-a');
  try {
    await eventually('node a owns every shard', async () => ((await sample(a, 'gs_cluster_shards_owned')) === SHARDS ? true : undefined), 30_000);
    t.equal(await sample(a, 'gs_cluster_shard_handovers_total', 'gs_direction="gained"'), SHARDS, 'each shard gained is counted');
    const b = await node('metrics-b');
    try {
      await eventually(
        'the shards are spread over both nodes',
        async () => {
          const [ownedA, ownedB] = [await sample(a, 'gs_cluster_shards_owned'), await sample(b, 'gs_cluster_shards_owned')];
          return ownedA === SHARDS / 2 && ownedB === SHARDS / 2 ? true : undefined;
        },
        60_000,
      );
      t.pass('shards owned per node: half each');
      t.equal(await sample(a, 'gs_cluster_shard_handovers_total', 'gs_reason="handed-over"'), SHARDS / 2, 'node a counts the shards it handed over');
      t.equal(await sample(b, 'gs_cluster_shard_handovers_total', 'gs_direction="gained"'), SHARDS / 2, 'node b counts the shards it gained');
    } finally {
      await b.stop();
    }
  } finally {
    await a.stop();
  }
});

import t, { type Test } from 'tap';
import type { Database } from '../../persistence/database.ts';
import { ClusterNode } from '../../runtime/cluster/cluster-node.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { createLogger } from '../../runtime/logger.ts';
import { systemClock } from '../../runtime/clock.ts';
import { DELETED_ENDPOINT_TTL_MS, DELIVERIES_KEPT, startDeliveryRetention } from '../../actors/webhook/retention.ts';
import { purgeExpiredIdempotencyKeys } from '../../actors/workspace/idempotency-retention.ts';
import { clusterDatabase, eventually, NEEDS_POSTGRES } from './support.ts';

const SHARDS = 8;
const EXTRA = 5;

/** A workspace with a live endpoint holding DELIVERIES_KEPT + EXTRA delivered deliveries, and an endpoint deleted long ago. */
async function seedWorkspace(db: Database, workspaceId: string): Promise<{ live: string; deleted: string }> {
  const em = db.em();
  await em.execute(`insert into workspaces (id, name, plan, created_at, updated_at) values (?, ?, 'pro', now(), now())`, [workspaceId, workspaceId]);
  const live = `whk_${workspaceId}_live`;
  const deleted = `whk_${workspaceId}_gone`;
  await em.execute(
    `insert into webhook_endpoints (id, workspace_id, url, event_types, status, secret_sealed, created_at, updated_at, deleted_at)
     values (?, ?, 'https://example.com/hook', '[]', 'active', 'sealed', now(), now(), null),
            (?, ?, 'https://example.com/hook', '[]', 'active', '', now(), now(), ?)`,
    [live, workspaceId, deleted, workspaceId, new Date(Date.now() - DELETED_ENDPOINT_TTL_MS - 3_600_000)],
  );
  await em.execute(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, body, status, created_at, updated_at)
     select ? || lpad(n::text, 4, '0'), ?, ?, 'gen_x', 'generation.succeeded', '{}', 'delivered', now(), now() from generate_series(1, ?) as n`,
    [`dlv_${workspaceId}_`, live, workspaceId, DELIVERIES_KEPT + EXTRA],
  );
  return { live, deleted };
}

async function state(db: Database, endpoints: { live: string; deleted: string }): Promise<{ deliveries: number; deletedEndpoint: boolean }> {
  const [row] = await db.em().execute<Array<{ n: string | number }>>('select count(*) as n from webhook_deliveries where endpoint_id = ?', [endpoints.live]);
  const gone = await db.em().execute<Array<{ id: string }>>('select id from webhook_endpoints where id = ?', [endpoints.deleted]);
  return { deliveries: Number(row!.n), deletedEndpoint: gone.length === 1 };
}

function makeNode(t: Test, db: Database, nodeId: string): ClusterNode {
  const node = new ClusterNode({
    db,
    nodeId,
    address: `127.0.0.1:${9100 + nodeId.charCodeAt(0)}`,
    shardCount: SHARDS,
    heartbeatMs: 100,
    deadAfterMs: 1_500,
    leaseMs: 1_500,
  });
  t.teardown(() => node.stop());
  return node;
}

t.test(
  'cluster mode: each node prunes the webhook deliveries and deleted endpoints of the shards it owns, and only those',
  { skip: NEEDS_POSTGRES },
  async (t) => {
    const db = await clusterDatabase(t);
    const a = makeNode(t, db, 'a');
    const b = makeNode(t, db, 'b');
    await Promise.all([a.start(), b.start()]);
    await eventually('the shards to spread evenly over both nodes', () =>
      a.ownedShards().length === SHARDS / 2 && b.ownedShards().length === SHARDS / 2 ? true : undefined,
    );
    const shardsOfA = new Set(a.ownedShards().map((lease) => lease.shard));
    // One workspace in a shard of each node.
    let wsA: string | undefined;
    let wsB: string | undefined;
    for (let i = 0; wsA === undefined || wsB === undefined; i++) {
      const id = `ws_retention_${i}`;
      if (shardsOfA.has(shardOf(id, SHARDS))) wsA ??= id;
      else wsB ??= id;
    }
    const ofA = await seedWorkspace(db, wsA);
    const ofB = await seedWorkspace(db, wsB);
    const logger = createLogger('silent');
    const retentionOf = (node: ClusterNode) => {
      const retention = startDeliveryRetention(db, systemClock, logger, () => ({ shards: node.ownedShards().map((lease) => lease.shard), shardCount: SHARDS }));
      t.teardown(() => retention.stop());
      return retention;
    };
    const retentionA = retentionOf(a);
    const retentionB = retentionOf(b);
    const before = { deliveries: DELIVERIES_KEPT + EXTRA, deletedEndpoint: true };
    t.same(await state(db, ofA), before);
    t.same(await state(db, ofB), before);

    await retentionA.runNow();
    t.same(await state(db, ofA), { deliveries: DELIVERIES_KEPT, deletedEndpoint: false }, "node a pruned its workspace's endpoint and purged its deleted one");
    t.same(await state(db, ofB), before, "node a left the other node's workspace alone");

    await retentionB.runNow();
    t.same(await state(db, ofB), { deliveries: DELIVERIES_KEPT, deletedEndpoint: false }, 'node b pruned its own');
    const [kept] = await db.em().execute<Array<{ oldest: string }>>('select min(id) as oldest from webhook_deliveries where endpoint_id = ?', [ofB.live]);
    t.equal(kept!.oldest, `dlv_${wsB}_${String(EXTRA + 1).padStart(4, '0')}`, 'the most recent ones were kept');
  },
);

t.test('a node that owns no shard prunes nothing; without a cluster everything is pruned', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  const first = await seedWorkspace(db, 'ws_first');
  const second = await seedWorkspace(db, 'ws_second');
  const logger = createLogger('silent');
  const idle = startDeliveryRetention(db, systemClock, logger, () => ({ shards: [], shardCount: SHARDS }));
  const single = startDeliveryRetention(db, systemClock, logger);
  t.teardown(async () => {
    await idle.stop();
    await single.stop();
  });
  await idle.runNow();
  t.same(await state(db, first), { deliveries: DELIVERIES_KEPT + EXTRA, deletedEndpoint: true });
  await single.runNow();
  t.same(await state(db, first), { deliveries: DELIVERIES_KEPT, deletedEndpoint: false });
  t.same(await state(db, second), { deliveries: DELIVERIES_KEPT, deletedEndpoint: false });
});

t.test('cluster mode: each node purges the expired Idempotency-Keys of the shards it owns, and only those', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  const owned = (shards: number[]) => ({ shards, shardCount: SHARDS });
  // Two workspaces in different shards, each with an expired key and one still in its day.
  const ids: string[] = [];
  for (let i = 0; ids.length < 2; i++) {
    const id = `ws_keys_${i}`;
    if (ids.every((other) => shardOf(other, SHARDS) !== shardOf(id, SHARDS))) ids.push(id);
  }
  const now = Date.now();
  for (const id of ids) {
    await db.em().execute(`insert into workspaces (id, name, plan, created_at, updated_at) values (?, ?, 'pro', now(), now())`, [id, id]);
    await db.em().execute(
      `insert into idempotency_keys (workspace_id, key, request_hash, response_status, response_body, created_at, expires_at)
       values (?, 'expired', 'h', 201, '{}', ?, ?), (?, 'live', 'h', 201, '{}', ?, ?)`,
      [id, new Date(now - 2 * 86_400_000), new Date(now - 60_000), id, new Date(now - 60_000), new Date(now + 86_400_000)],
    );
  }
  const keysOf = async (id: string) =>
    (await db.em().execute<Array<{ key: string }>>('select key from idempotency_keys where workspace_id = ? order by key', [id])).map((row) => row.key);
  const [first, second] = ids as [string, string];

  t.equal(await purgeExpiredIdempotencyKeys(db, now, owned([])), 0, 'a node that owns no shard purges nothing');
  t.equal(await purgeExpiredIdempotencyKeys(db, now, owned([shardOf(first, SHARDS)])), 1);
  t.same(await keysOf(first), ['live'], "the owner of the first workspace's shard purged its expired key");
  t.same(await keysOf(second), ['expired', 'live'], 'and left the other shard alone');
  t.equal(await purgeExpiredIdempotencyKeys(db, now), 1, 'without a cluster, every workspace');
  t.same(await keysOf(second), ['live']);
});

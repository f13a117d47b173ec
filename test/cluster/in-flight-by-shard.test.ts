import t from 'tap';
import { jobsInFlightByShard } from '../../actors/generation/in-flight-by-shard.ts';
import { HeldJobs } from '../../actors/generation/held-jobs.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import type { Database } from '../../persistence/database.ts';
import { clusterDatabase, NEEDS_POSTGRES } from './support.ts';

const SHARDS = 8;
const STATUSES = ['queued', 'reserved', 'submitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired'];

async function addJobs(db: Database, workspaceId: string, statuses: string[], batch = 'a'): Promise<void> {
  await db.em().execute(
    `insert into generations (id, workspace_id, mode, model_id, status, params, inputs, payment_mode, credits, provider, timeline, queue_deadline, created_at, updated_at)
     select 'gen_' || ? || '_' || ? || n, ?, 'text_to_text', 'local/text-mini', s, '{}', '{}', 'credits', 1, 'local', '[]', now(), now(), now()
       from unnest(?::text[]) with ordinality as v(s, n)`,
    [workspaceId, batch, workspaceId, `{${statuses.join(',')}}`],
  );
}

t.test(
  'the jobs in flight of each shard, counted for every shard in one statement shared by the drains that ask meanwhile',
  { skip: NEEDS_POSTGRES },
  async (t) => {
    const db = await clusterDatabase(t);
    const expected = new Map<number, number>();
    for (let i = 0; i < 20; i++) {
      const workspaceId = `ws_inflight_${i}`;
      await db.em().execute(`insert into workspaces (id, name, plan, created_at, updated_at) values (?, ?, 'team', now(), now())`, [workspaceId, workspaceId]);
      // Workspace i has i % 4 jobs in each status: only reserved, submitted and running count.
      const statuses = STATUSES.flatMap((status) => Array.from({ length: i % 4 }, () => status));
      if (statuses.length > 0) await addJobs(db, workspaceId, statuses);
      const shard = shardOf(workspaceId, SHARDS);
      expected.set(shard, (expected.get(shard) ?? 0) + 3 * (i % 4));
    }
    const fresh = jobsInFlightByShard(db, SHARDS, { maxAgeMs: 0 });
    for (let shard = 0; shard < SHARDS; shard++) {
      t.equal(await fresh({ shard, shardCount: SHARDS }), expected.get(shard) ?? 0, `shard ${shard}`);
    }

    // Within maxAgeMs every shard's answer comes from the same count: a job started since is not seen yet.
    const shared = jobsInFlightByShard(db, SHARDS, { maxAgeMs: 3_600_000 });
    const shard = shardOf('ws_inflight_1', SHARDS);
    const before = await shared({ shard, shardCount: SHARDS });
    await addJobs(db, 'ws_inflight_1', ['running', 'running'], 'b');
    t.equal(await shared({ shard, shardCount: SHARDS }), before, 'the shared count');
    t.equal(await fresh({ shard, shardCount: SHARDS }), before + 2, 'a count made afresh sees the two new jobs');
    await t.rejects(fresh({ shard, shardCount: SHARDS * 2 }), RangeError, 'another shard count is refused');
  },
);

t.test('jobs held during the emergency stop are left out of the count; once released they count again at once', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  const workspaceId = 'ws_held';
  await db.em().execute(`insert into workspaces (id, name, plan, created_at, updated_at) values (?, ?, 'team', now(), now())`, [workspaceId, workspaceId]);
  await addJobs(db, workspaceId, ['running', 'submitted', 'reserved']);
  const scope = { shard: shardOf(workspaceId, SHARDS), shardCount: SHARDS };
  const held = new HeldJobs();
  // A count shared for an hour: only a release makes it count afresh.
  const count = jobsInFlightByShard(db, SHARDS, { maxAgeMs: 3_600_000, held });
  held.hold(`gen_${workspaceId}_a1`, workspaceId);
  held.hold(`gen_${workspaceId}_a2`, workspaceId);
  t.equal(await count(scope), 1, 'the two held jobs are not waited for; the third is');
  held.release(`gen_${workspaceId}_a1`);
  t.equal(await count(scope), 2, 'a released job is counted at once, though the last count is younger than its maxAge');
  held.forget((id) => id === workspaceId);
  t.same(held.ids(), [], "a lost shard's held jobs are forgotten");
});

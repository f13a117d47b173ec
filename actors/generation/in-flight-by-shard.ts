import type { Database } from '../../persistence/database.ts';
import { shardOfSql } from '../../persistence/cluster/shard-sql.ts';
import type { ShardScope } from './recovery.ts';

/** How long one count serves the shards' drains that ask meanwhile. */
const MAX_AGE_MS = 100;

/**
 * Cluster mode: how many of a shard's jobs are in flight (reserved, submitted or running), for the drain
 * of a shard before its handover, which asks every few tens of milliseconds until none is left. One
 * statement counts every shard's at once and serves every drain that asks within maxAgeMs: a node giving
 * up forty shards at once (two nodes joining) makes a few statements a second, not forty times as many,
 * each of which reads every unfinished job of the database.
 */
export function jobsInFlightByShard(db: Database, shardCount: number, maxAgeMs = MAX_AGE_MS): (scope: ShardScope) => Promise<number> {
  let last: { at: number; counts: Promise<Map<number, number>> } | undefined;
  const load = async (): Promise<Map<number, number>> => {
    const rows = await db.em().execute<Array<{ shard: number | string; n: number | string }>>(
      `select ${shardOfSql('workspace_id')} as shard, count(*) as n from generations
        where status in ('reserved', 'submitted', 'running') group by 1`, [shardCount]);
    return new Map(rows.map((row) => [Number(row.shard), Number(row.n)]));
  };
  return async (scope) => {
    if (scope.shardCount !== shardCount) throw new RangeError(`jobs in flight are counted over ${shardCount} shards, not ${scope.shardCount}`);
    const now = Date.now();
    if (!last || now - last.at >= maxAgeMs) {
      const counts = load();
      const entry = { at: now, counts };
      last = entry;
      // A failed count is not kept: the next caller asks again.
      counts.catch(() => { if (last === entry) last = undefined; });
    }
    return (await last.counts).get(scope.shard) ?? 0;
  };
}

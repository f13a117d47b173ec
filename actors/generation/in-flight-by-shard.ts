import type { Database } from '../../persistence/database.ts';
import { jobsInFlightByShardCount } from '../../persistence/stores/generations/unfinished.ts';
import type { HeldJobs } from './held-jobs.ts';
import type { ShardScope } from '../../persistence/cluster/shard-sql.ts';

/** How long one count serves the shards' drains that ask meanwhile. */
const MAX_AGE_MS = 100;

/**
 * Cluster mode: how many of a shard's jobs are in flight (reserved, submitted or running), for the drain
 * of a shard before its handover, which asks every few tens of milliseconds until none is left. One
 * statement counts every shard's at once and serves every drain that asks within maxAgeMs: a node giving
 * up forty shards at once (two nodes joining) makes a few statements a second, not forty times as many,
 * each of which reads every unfinished job of the database.
 *
 * With `held`, the jobs this node holds during the emergency stop (at no provider: nothing would end them)
 * are left out. A count made before one of them was released to its provider is never used after.
 */
export function jobsInFlightByShard(
  db: Database,
  shardCount: number,
  options: { maxAgeMs?: number; held?: HeldJobs } = {},
): (scope: ShardScope) => Promise<number> {
  const { maxAgeMs = MAX_AGE_MS, held } = options;
  let last: { at: number; version: number; counts: Promise<Map<number, number>> } | undefined;
  const load = async (): Promise<Map<number, number>> => {
    const heldIds = held?.ids() ?? [];
    return jobsInFlightByShardCount(db, shardCount, heldIds);
  };
  return async (scope) => {
    if (scope.shardCount !== shardCount) throw new RangeError(`jobs in flight are counted over ${shardCount} shards, not ${scope.shardCount}`);
    for (;;) {
      const now = Date.now();
      const version = held?.version ?? 0;
      if (!last || now - last.at >= maxAgeMs || last.version !== version) {
        const counts = load();
        const entry = { at: now, version, counts };
        last = entry;
        // A failed count is not kept: the next caller asks again.
        counts.catch(() => {
          if (last === entry) last = undefined;
        });
      }
      const entry = last;
      const count = (await entry.counts).get(scope.shard) ?? 0;
      // A job released while the count ran may have been left out as held: count again.
      if (entry.version === (held?.version ?? 0)) return count;
    }
  };
}

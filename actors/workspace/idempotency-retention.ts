import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import { startPeriodicJob, type PeriodicJob } from '../../runtime/periodic-job.ts';
import type { Database } from '../../persistence/database.ts';
import type { OwnedShards } from '../../persistence/cluster/shard-sql.ts';
import { deleteExpiredIdempotencyKeys } from '../../persistence/stores/workspace/idempotency.ts';

/** How often expired Idempotency-Keys are purged. */
export const IDEMPOTENCY_PURGE_INTERVAL_MS = 10 * 60_000;
/** Keys deleted per statement. */
export const IDEMPOTENCY_PURGE_PAGE = 5_000;

/**
 * Deletes the stored Idempotency-Keys (idempotency_keys) that expired before `now`, a page at a time
 * until none is left. Nothing reads an expired key (a create with it again is a new request and writes
 * it afresh), so the table holds about one day of keys, not every key ever sent. A key being written
 * again meanwhile is safe: its row, updated to a later expiry, no longer matches when the delete reaches
 * it. With `owned` (cluster mode), only the keys of workspaces in those shards. Returns how many went.
 */
export async function purgeExpiredIdempotencyKeys(db: Database, now: number, owned?: OwnedShards, page = IDEMPOTENCY_PURGE_PAGE): Promise<number> {
  if (owned && owned.shards.length === 0) return 0;
  return deleteExpiredIdempotencyKeys(db, new Date(now), owned, page);
}

/**
 * Runs purgeExpiredIdempotencyKeys every IDEMPOTENCY_PURGE_INTERVAL_MS on the service clock. Cluster mode:
 * `owned` gives the shards this node owns at each run, so each key is purged by one node.
 */
export function startIdempotencyKeyPurge(db: Database, clock: Clock, logger: Logger, owned?: () => OwnedShards): PeriodicJob {
  return startPeriodicJob(clock, logger, 'idempotency key purge', IDEMPOTENCY_PURGE_INTERVAL_MS, async () => {
    const purged = await purgeExpiredIdempotencyKeys(db, clock.now(), owned?.());
    if (purged > 0) logger.info({ purged }, 'expired Idempotency-Keys purged');
  });
}

import type { Clock } from '../../runtime/clock.ts';
import { startPeriodicJob, type PeriodicJob } from '../../runtime/periodic-job.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { Database } from '../../persistence/database.ts';
import type { OwnedShards } from '../../persistence/cluster/shard-sql.ts';
import { purgeWebhookHistory } from '../../persistence/stores/webhooks/retention.ts';
import { EVENT_RETENTION_MS } from './events.ts';
import { RECOVER_KEY_TTL_MS, RECOVER_WINDOW_MS } from './resend-failed.ts';

/** Deliveries kept per endpoint: the 100 most recent are listed (docs/webhooks.md, Delivery history). */
export const DELIVERIES_KEPT = 100;
/** How often the retention job runs. */
export const RETENTION_INTERVAL_MS = 10 * 60_000;
/** A deleted endpoint's row and history are purged this long after its deletion. */
export const DELETED_ENDPOINT_TTL_MS = 7 * 24 * 3_600_000;

export type { OwnedShards } from '../../persistence/cluster/shard-sql.ts';

/**
 * Keeps the deliveries table bounded: beyond the 100 most recent deliveries of an endpoint, finished ones
 * are deleted (a pending one never is: it has yet to be sent; a failed or expired one is kept
 * RECOVER_WINDOW_MS, for POST /v1/webhooks/:id/recover), and deleted endpoints go after a week. Events go
 * after EVENT_RETENTION_MS, recover requests' Idempotency-Keys after RECOVER_KEY_TTL_MS.
 * With `owned` (cluster mode), only the endpoints of workspaces in those shards, so each node prunes what
 * it owns and the cluster prunes each endpoint once. Returns how many deliveries and endpoints were removed.
 */
export async function pruneDeliveries(db: Database, now: number, owned?: OwnedShards): Promise<{ deliveries: number; endpoints: number; events: number }> {
  if (owned && owned.shards.length === 0) return { deliveries: 0, endpoints: 0, events: 0 };
  return purgeWebhookHistory(
    db,
    {
      deliveriesKept: DELIVERIES_KEPT,
      failedSince: new Date(now - RECOVER_WINDOW_MS),
      deletedBefore: new Date(now - DELETED_ENDPOINT_TTL_MS),
      eventsBefore: new Date(now - EVENT_RETENTION_MS),
      recoveriesBefore: new Date(now - RECOVER_KEY_TTL_MS),
    },
    owned,
  );
}

/**
 * Runs pruneDeliveries every RETENTION_INTERVAL_MS on the service clock; stop() ends it. Cluster mode:
 * `owned` gives the shards this node owns at each run (each node prunes its own endpoints).
 */
export function startDeliveryRetention(db: Database, clock: Clock, logger: Logger, owned?: () => OwnedShards): PeriodicJob {
  return startPeriodicJob(clock, logger, 'webhook retention', RETENTION_INTERVAL_MS, async () => {
    const removed = await pruneDeliveries(db, clock.now(), owned?.());
    if (removed.deliveries > 0 || removed.endpoints > 0 || removed.events > 0) logger.info(removed, 'webhook retention: pruned');
  });
}

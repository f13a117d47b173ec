import type { Clock } from '../../runtime/clock.ts';
import { startPeriodicJob, type PeriodicJob } from '../../runtime/periodic-job.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { Database } from '../../persistence/database.ts';
import { ownedShardsSql, type OwnedShards } from '../../persistence/cluster/shard-sql.ts';
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
  const only = ownedShardsSql('workspace_id', owned);
  const em = db.em();
  const deliveries = await em.execute<Array<{ id: string }>>(
    `delete from webhook_deliveries d using (
       select id from (
         select id, status, created_at, row_number() over (partition by endpoint_id order by id desc) as n from webhook_deliveries
         ${owned ? `where endpoint_id in (select id from webhook_endpoints where true${only.sql})` : ''}
       ) ranked where ranked.n > ? and ranked.status <> 'pending'
         and not (ranked.status in ('failed', 'expired') and ranked.created_at >= ?)
     ) old where d.id = old.id returning d.id`,
    [...only.params, DELIVERIES_KEPT, new Date(now - RECOVER_WINDOW_MS)],
  );
  const endpoints = await em.execute<Array<{ id: string }>>(
    `delete from webhook_endpoints where deleted_at is not null and deleted_at < ?${only.sql} returning id`,
    [new Date(now - DELETED_ENDPOINT_TTL_MS), ...only.params],
  );
  const events = await em.execute<Array<{ id: string }>>(`delete from webhook_events where created_at < ?${only.sql} returning id`, [
    new Date(now - EVENT_RETENTION_MS),
    ...only.params,
  ]);
  await em.execute(`delete from webhook_recoveries where created_at < ?${only.sql} returning endpoint_id`, [
    new Date(now - RECOVER_KEY_TTL_MS),
    ...only.params,
  ]);
  return { deliveries: deliveries.length, endpoints: endpoints.length, events: events.length };
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

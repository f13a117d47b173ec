/** The webhook history's purge: old deliveries, deleted endpoints, old events and recover keys. */
import type { Database } from '../../database.ts';
import { ownedShardsSql, type OwnedShards } from '../../cluster/shard-sql.ts';

export interface WebhookPurge {
  /** Deliveries kept per endpoint, the most recent, whatever their status. */
  deliveriesKept: number;
  /** Failed and expired deliveries made since then are kept (for recover). */
  failedSince: Date;
  /** Endpoints deleted before then are purged. */
  deletedBefore: Date;
  /** Events made before then are purged. */
  eventsBefore: Date;
  /** Recover requests' keys made before then are purged. */
  recoveriesBefore: Date;
}

/** Purges what `purge` says, of the workspaces of `owned` when given (cluster mode); returns how many of each went. */
export async function purgeWebhookHistory(
  db: Database,
  purge: WebhookPurge,
  owned?: OwnedShards,
): Promise<{ deliveries: number; endpoints: number; events: number }> {
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
    [...only.params, purge.deliveriesKept, purge.failedSince],
  );
  const endpoints = await em.execute<Array<{ id: string }>>(
    `delete from webhook_endpoints where deleted_at is not null and deleted_at < ?${only.sql} returning id`,
    [purge.deletedBefore, ...only.params],
  );
  const events = await em.execute<Array<{ id: string }>>(`delete from webhook_events where created_at < ?${only.sql} returning id`, [
    purge.eventsBefore,
    ...only.params,
  ]);
  await em.execute(`delete from webhook_recoveries where created_at < ?${only.sql} returning endpoint_id`, [purge.recoveriesBefore, ...only.params]);
  return { deliveries: deliveries.length, endpoints: endpoints.length, events: events.length };
}

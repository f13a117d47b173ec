import type { Actors } from '../kinds.ts';
import type { RecoveryTask } from '../../runtime/recovery.ts';
import type { Database } from '../../persistence/database.ts';
import { shardCondition, type ShardScope } from '../generation/recovery.ts';

/**
 * After a restart, every endpoint with pending deliveries is woken: each delivery resumes at its recorded
 * next attempt time, and one whose attempt was on the wire at the crash (still pending, its attempt never
 * recorded) is sent again: at least once, never dropped.
 */
export function webhookRecovery(db: Database, actors: Actors, scope?: ShardScope): RecoveryTask {
  return {
    name: scope ? `webhook deliveries of shard ${scope.shard}` : 'webhook deliveries',
    async run() {
      const only = shardCondition('workspace_id', scope);
      const rows = await db
        .em()
        .execute<Array<{ endpoint_id: string }>>(`select distinct endpoint_id from webhook_deliveries where status = 'pending'${only.sql}`, only.params);
      for (const row of rows) actors.tell('whk', row.endpoint_id, { type: 'wake' });
      return rows.length;
    },
  };
}

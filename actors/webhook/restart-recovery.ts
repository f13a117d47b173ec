import type { Actors } from '../kinds.ts';
import type { RecoveryTask } from '../../runtime/recovery.ts';
import type { Database } from '../../persistence/database.ts';
import { endpointsWithPending } from '../../persistence/stores/webhooks/deliveries.ts';
import type { ShardScope } from '../../persistence/cluster/shard-sql.ts';

/**
 * After a restart, every endpoint with pending deliveries is woken: each delivery resumes at its recorded
 * next attempt time, and one whose attempt was on the wire at the crash (still pending, its attempt never
 * recorded) is sent again: at least once, never dropped.
 */
export function webhookRecovery(db: Database, actors: Actors, scope?: ShardScope): RecoveryTask {
  return {
    name: scope ? `webhook deliveries of shard ${scope.shard}` : 'webhook deliveries',
    async run() {
      const endpoints = await endpointsWithPending(db, scope);
      for (const endpointId of endpoints) actors.tell('whk', endpointId, { type: 'wake' });
      return endpoints.length;
    },
  };
}

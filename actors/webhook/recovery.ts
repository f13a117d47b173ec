import type { ActorMessenger } from '../../runtime/actor-behavior.ts';
import type { RecoveryTask } from '../../runtime/recovery.ts';
import type { Database } from '../../persistence/database.ts';

/**
 * After a restart, every endpoint with pending deliveries is woken: each delivery resumes at its recorded
 * next attempt time, and one whose attempt was on the wire at the crash (still pending, its attempt never
 * recorded) is sent again: at least once, never dropped.
 */
export function webhookRecovery(db: Database, actors: ActorMessenger): RecoveryTask {
  return {
    name: 'webhook deliveries',
    async run() {
      const rows = await db.em().execute<Array<{ endpoint_id: string }>>(
        `select distinct endpoint_id from webhook_deliveries where status = 'pending'`);
      for (const row of rows) actors.tell('whk', row.endpoint_id, { type: 'wake' });
      return rows.length;
    },
  };
}

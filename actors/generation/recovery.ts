import type { ActorMessenger } from '../../runtime/actor-behavior.ts';
import type { RecoveryTask } from '../../runtime/recovery.ts';
import type { Database } from '../../persistence/database.ts';

/**
 * After a restart, every unfinished generation resumes: queued ones keep their original deadline and
 * wait for a slot; ones in flight at the crash are failed with `interrupted` and their credits released.
 */
export function generationRecovery(db: Database, actors: ActorMessenger): RecoveryTask {
  return {
    name: 'generations',
    async run() {
      const rows = await db.em().execute<Array<{ id: string; workspace_id: string; status: string }>>(
        `select id, workspace_id, status from generations where status in ('queued', 'reserved', 'submitted', 'running') order by created_at, id`);
      for (const row of rows) actors.tell('gen', row.id, { type: 'recover' });
      for (const workspaceId of new Set(rows.map((r) => r.workspace_id))) actors.tell('ws', workspaceId, { type: 'schedule' });
      return rows.length;
    },
  };
}

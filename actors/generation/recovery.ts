import type { ActorMessenger } from '../../runtime/actor-behavior.ts';
import type { RecoveryTask } from '../../runtime/recovery.ts';
import type { Database } from '../../persistence/database.ts';
import { shardOfSql } from '../../persistence/cluster/shard-sql.ts';

/** Cluster mode: recover only the workspaces of one shard (the one just gained). */
export interface ShardScope {
  shard: number;
  shardCount: number;
}

/** The condition and parameters that keep a statement to one shard's workspaces (none without a scope). */
export function shardCondition(column: string, scope: ShardScope | undefined): { sql: string; params: number[] } {
  return scope ? { sql: ` and ${shardOfSql(column)} = ?`, params: [scope.shardCount, scope.shard] } : { sql: '', params: [] };
}

/**
 * After a restart, every unfinished generation resumes: queued ones keep their original deadline and
 * wait for a slot; ones in flight at the crash are handed to their provider again (see the generation
 * actor's `recover`). The workspaces of jobs in flight load first: loading takes back the plan's
 * concurrency slots and the providers' capacity those jobs hold, before any of them reaches a provider
 * and before a queued job is let start beside them. Queued jobs need no actor of their own until they
 * start: their workspace's actor loads them with their deadlines (those already past expire at once),
 * so a shard with thousands of queued jobs is recovered without loading each of them.
 */
export function generationRecovery(db: Database, actors: ActorMessenger, scope?: ShardScope): RecoveryTask {
  return {
    name: scope ? `generations of shard ${scope.shard}` : 'generations',
    async run() {
      const only = shardCondition('workspace_id', scope);
      const rows = await db.em().execute<Array<{ id: string; workspace_id: string; status: string }>>(
        `select id, workspace_id, status from generations where status in ('queued', 'reserved', 'submitted', 'running')${only.sql} order by created_at, id`, only.params);
      const inFlight = new Set(rows.filter((r) => r.status !== 'queued').map((r) => r.workspace_id));
      await Promise.all([...inFlight].map((workspaceId) => actors.ask('ws', workspaceId, { type: 'balances' })));
      for (const row of rows) if (row.status !== 'queued') actors.tell('gen', row.id, { type: 'recover' });
      for (const workspaceId of new Set(rows.map((r) => r.workspace_id))) actors.tell('ws', workspaceId, { type: 'schedule' });
      return rows.length;
    },
  };
}

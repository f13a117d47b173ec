/** The statements of billing: subscriptions. */
import type { Database } from '../database.ts';
import { shardCondition, type ShardScope } from '../cluster/shard-sql.ts';

/** A live subscription as its renewal timer needs it. */
export interface LiveSubscription {
  id: string;
  workspaceId: string;
  currentPeriodEnd: Date;
}

/** Every active subscription (of one shard's workspaces, with `scope`). */
export async function liveSubscriptions(db: Database, scope?: ShardScope): Promise<LiveSubscription[]> {
  const only = shardCondition('workspace_id', scope);
  const rows = await db
    .em()
    .execute<Array<{ id: string; workspace_id: string; current_period_end: Date | string }>>(
      `select id, workspace_id, current_period_end from subscriptions where status = 'active'${only.sql}`,
      only.params,
    );
  return rows.map((row) => ({ id: row.id, workspaceId: row.workspace_id, currentPeriodEnd: new Date(row.current_period_end) }));
}

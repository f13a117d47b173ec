/** The statements that find unfinished generations: at recovery, for a shard's drain, for the queue's nudge, for stale provider slots. */
import { shardOfSql } from '../../cluster/shard-sql.ts';
import type { Database } from '../../database.ts';
import { generationRowOf, type GenerationRow } from '../../entities/generation.ts';
import { shardCondition, type ShardScope } from '../../cluster/shard-sql.ts';

/** A job in flight as recovery reads it: its row and the trace context it was created in. */
export interface InFlightJob {
  row: GenerationRow;
  traceContext: unknown;
}

/**
 * One page of the jobs in flight (reserved, submitted, running), of one shard's workspaces with `scope`, in
 * (created_at, id) order after `after`: a keyset on the unfinished jobs' index (migration 0013).
 */
export async function jobsInFlightPage(
  db: Database,
  scope: ShardScope | undefined,
  after: { createdAt: Date; id: string } | undefined,
  limit: number,
): Promise<InFlightJob[]> {
  const only = shardCondition('workspace_id', scope);
  const page = await db.em().execute<Array<Record<string, unknown>>>(
    `select * from generations where status in ('reserved', 'submitted', 'running')${only.sql}
           ${after ? 'and (created_at, id) > (?, ?)' : ''} order by created_at, id limit ?`,
    [...only.params, ...(after ? [after.createdAt, after.id] : []), limit],
  );
  return page.map((raw) => ({ row: generationRowOf(raw), traceContext: raw.trace_context }));
}

/** How many queued jobs each workspace has (of one shard's workspaces, with `scope`); workspaces with none are left out. */
export async function queuedByWorkspace(db: Database, scope?: ShardScope): Promise<Array<{ workspaceId: string; queued: number }>> {
  const only = shardCondition('workspace_id', scope);
  const waiting = await db
    .em()
    .execute<Array<{ workspace_id: string; n: number | string }>>(
      `select workspace_id, count(*) as n from generations where status = 'queued'${only.sql} group by workspace_id`,
      only.params,
    );
  return waiting.map((row) => ({ workspaceId: row.workspace_id, queued: Number(row.n) }));
}

/** The workspaces with a queued job. */
export async function workspacesWithQueued(db: Database): Promise<string[]> {
  const rows = await db.em().execute<Array<{ workspace_id: string }>>(`select distinct workspace_id from generations where status = 'queued'`);
  return rows.map((r) => r.workspace_id);
}

/** How many jobs are in flight in each shard (of `shardCount`), but the jobs `except`. */
export async function jobsInFlightByShardCount(db: Database, shardCount: number, except: string[]): Promise<Map<number, number>> {
  const rows = await db.em().execute<Array<{ shard: number | string; n: number | string }>>(
    `select ${shardOfSql('workspace_id')} as shard, count(*) as n from generations
        where status in ('reserved', 'submitted', 'running')
          ${except.length > 0 ? 'and id not in (select jsonb_array_elements_text(?::jsonb))' : ''}
        group by 1`,
    except.length > 0 ? [shardCount, JSON.stringify(except)] : [shardCount],
  );
  return new Map(rows.map((row) => [Number(row.shard), Number(row.n)]));
}

/**
 * Of these generation ids, those that ended in a workspace of the owned shards, and those no longer in
 * the database at all.
 */
export async function endedOrGoneAmong(db: Database, ids: string[], owned: { shards: number[]; shardCount: number }): Promise<string[]> {
  const rows = await db.em().execute<Array<{ id: string }>>(
    `select v.id from jsonb_array_elements_text(?::jsonb) as v(id) left join generations g on g.id = v.id
     where g.id is null or (g.status not in ('queued', 'reserved', 'submitted', 'running')
       and ${shardOfSql('g.workspace_id')} in (select value::int4 from jsonb_array_elements_text(?::jsonb)))`,
    [JSON.stringify(ids), owned.shardCount, JSON.stringify(owned.shards)],
  );
  return rows.map((row) => row.id);
}

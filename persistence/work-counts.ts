import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Database } from './database.ts';
import { knexPoolOf } from './driver-internals.ts';

/** Unfinished generations by status, across the database (the partial index of active jobs serves it). */
export async function activeGenerationCounts(db: Database): Promise<Map<string, number>> {
  const rows = await db
    .em()
    .execute<Array<{ status: string; count: string | number }>>(
      `select status, count(*) as count from generations where status in ('queued', 'reserved', 'submitted', 'running') group by status`,
    );
  return new Map(rows.map((row) => [row.status, Number(row.count)]));
}

/** Webhook deliveries not yet delivered nor failed, across the database. */
export async function pendingDeliveryCount(db: Database): Promise<number> {
  const rows = await db.em().execute<Array<{ count: string | number }>>(`select count(*) as count from webhook_deliveries where status = 'pending'`);
  return Number(rows[0]?.count ?? 0);
}

/** Connections of the database's pool (the knex pool under MikroORM); undefined when it has none to report. */
export function poolCounts(db: Database): { used: number; idle: number; pending: number } | undefined {
  try {
    const pool = knexPoolOf((db.orm.em as SqlEntityManager).getKnex());
    if (!pool) return undefined;
    return { used: pool.numUsed(), idle: pool.numFree(), pending: pool.numPendingAcquires() };
  } catch {
    return undefined;
  }
}

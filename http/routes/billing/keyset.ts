import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../errors.ts';
import { decodeCursor, pageOf } from '../../pagination.ts';

const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

export type Row = Record<string, unknown> & { id: string };

/**
 * One page of a workspace's rows of `table`, newest first by (created_at, id): an index range scan on
 * (workspace_id, created_at desc, id desc), with the cursor kept to the microsecond.
 */
export async function keysetPage<Out>(
  em: SqlEntityManager,
  table: string,
  where: string[],
  values: unknown[],
  page: { limit?: number; cursor?: string },
  toOut: (row: Row) => Out,
): Promise<{ data: Out[]; nextCursor: string | null }> {
  const limit = page.limit ?? 20;
  const conditions = [...where];
  const params = [...values];
  if (page.cursor) {
    const [at, id] = decodeCursor(page.cursor, ['string', 'string']) as [string, string];
    if (!CURSOR_TIME.test(at)) throw new ApiError('validation_error', 'query.cursor: is not a cursor this list gave out');
    conditions.push('(created_at, id) < (?::timestamptz, ?)');
    params.push(at, id);
  }
  params.push(limit + 1);
  const rows = await em.execute<Array<Row & { cursor_at: string }>>(
    `select *, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at from ${table}
      where ${conditions.join(' and ')} order by created_at desc, id desc limit ?`,
    params,
  );
  return pageOf(rows, limit, (row) => [row.cursor_at, row.id], toOut);
}

export function iso(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  return new Date(value as string | Date).toISOString();
}

import { ApiError } from '../../errors.ts';
import { decodeCursor, pageOf } from '../../pagination.ts';
import { moneyPage, type MoneyFilter, type MoneyRow, type MoneyTable } from '../../../persistence/stores/money.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';

const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

export type Row = MoneyRow;

/**
 * One page of a workspace's rows of `table`, newest first by (created_at, id), with the cursor kept to the
 * microsecond (persistence/stores/money.ts).
 */
export async function keysetPage<Out>(
  unit: Unit,
  table: MoneyTable,
  workspaceId: string,
  filter: MoneyFilter,
  page: { limit?: number; cursor?: string },
  toOut: (row: Row) => Out,
): Promise<{ data: Out[]; nextCursor: string | null }> {
  const limit = page.limit ?? 20;
  let after: [string, string] | undefined;
  if (page.cursor) {
    const [at, id] = decodeCursor(page.cursor, ['string', 'string']) as [string, string];
    if (!CURSOR_TIME.test(at)) throw new ApiError('validation_error', 'query.cursor: is not a cursor this list gave out');
    after = [at, id];
  }
  const rows = await moneyPage(unit, table, workspaceId, filter, { after, limit: limit + 1 });
  return pageOf(rows, limit, (row) => [row.cursor_at, row.id], toOut);
}

export function iso(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  return new Date(value as string | Date).toISOString();
}

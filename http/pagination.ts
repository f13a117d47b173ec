import { Type, type TSchema } from '@sinclair/typebox';
import { ApiError } from './errors.ts';

/** docs/api.md "Lists": `limit` 1 to 100 (default 20) and an opaque `cursor`. Spread into a route's query schema. */
export const PageQueryFields = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Items per page, 1 to 100.' })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'The nextCursor of the previous page.' })),
};

/** `{ data, nextCursor }`, newest first; nextCursor is null on the last page. */
export function Page<T extends TSchema>(item: T, description?: string) {
  return Type.Object(
    {
      data: Type.Array(item),
      nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page; null on the last page.' }),
    },
    { additionalProperties: false, ...(description ? { description } : {}) },
  );
}

/** A cursor is the sort key of the last item shown, as base64url JSON; clients treat it as opaque. */
export function encodeCursor(key: Array<string | number>): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

/** The sort key inside a cursor, checked against the expected shape; a forged or stale one is 400. */
export function decodeCursor(cursor: string, shape: Array<'string' | 'number'>): Array<string | number> {
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    key = undefined;
  }
  if (!Array.isArray(key) || key.length !== shape.length || key.some((part, i) => typeof part !== shape[i])) {
    throw new ApiError('validation_error', 'query.cursor: is not a cursor this list gave out');
  }
  return key as Array<string | number>;
}

/** Cuts a page of `limit + 1` rows to `limit` and makes the cursor from the last row kept. */
export function pageOf<Row, Out>(rows: Row[], limit: number, keyOf: (row: Row) => Array<string | number>, toOut: (row: Row) => Out) {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  return { data: kept.map(toOut), nextCursor: more ? encodeCursor(keyOf(kept[kept.length - 1]!)) : null };
}

import type { Database } from './database.ts';

/**
 * Runs `sql`, a `delete … returning` whose last parameter is the page size (`limit ?` in its selection of
 * rows), with `params` and then `page`, until a page comes back short: a backlog of millions goes in short
 * transactions, not one long one. Returns how many rows went in all.
 */
export async function deleteInPages(db: Database, sql: string, params: unknown[], page: number): Promise<number> {
  let deleted = 0;
  for (;;) {
    const gone = await db.em().execute<unknown[]>(sql, [...params, page]);
    deleted += gone.length;
    if (gone.length < page) return deleted;
  }
}

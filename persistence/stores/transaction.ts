import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Database } from '../database.ts';

/**
 * The transaction a store function's statements run in: a group-commit unit's (persistence/group-commit.ts)
 * or a request's own. Callers above the stores pass it along and never use it themselves.
 */
export type Transaction = SqlEntityManager;

/**
 * Runs `work` in a transaction of its own, outside the group commit (committed when it returns, rolled back
 * when it throws), for writes that span stores and must commit together.
 */
export function inNewTransaction<T>(db: Database, work: (tx: Transaction) => Promise<T>): Promise<T> {
  return db.em().transactional((tx) => work(tx));
}

import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Database } from '../database.ts';

declare const UNIT: unique symbol;

/**
 * One unit of work over the database: the store calls of one request that share a transaction, or rows
 * read earlier and changed later. Outside persistence/ it is opaque (nothing can be asked of it but to be
 * handed to a store function), so a statement cannot be written beside the stores; inside, it is the
 * ORM's entity manager (stores/orm.ts), and an actor's entity manager is one.
 */
export interface Unit {
  readonly id: number;
  readonly [UNIT]?: never;
}

/** A fresh unit of work: what one request reads and writes, outside any transaction until it opens one. */
export function openUnit(db: Database): Unit {
  return db.em();
}

/** Runs `work` in one transaction (committed when it returns, rolled back when it throws). */
export function inTransaction<T>(unit: Unit, work: (tx: Unit) => Promise<T>): Promise<T> {
  return (unit as SqlEntityManager).transactional((tx) => work(tx));
}

import type { SqlEntityManager } from '@mikro-orm/postgresql';

/**
 * The id of a write transaction (`txid_current()`), read by one of its own statements: the group-commit writer
 * needs it before COMMIT (to learn, should the connection drop during COMMIT, whether it committed), and a
 * unit whose statement returns it in the same round trip spares the writer a statement of its own.
 */
const noted = new WeakMap<object, string>();

/** A column a statement adds to what it returns: the id of its transaction, as `txid`. */
export const TXID_COLUMN = 'txid_current()::text as txid';

/** Notes the id a statement of em's transaction read (TXID_COLUMN); ignored outside a transaction. */
export function noteTransactionId(em: SqlEntityManager, txid: unknown): void {
  const trx = em.getTransactionContext();
  if (trx && typeof txid === 'string' && txid !== '') noted.set(trx, txid);
}

/** The id noted for em's transaction, if a statement read it. */
export function notedTransactionId(em: SqlEntityManager): string | undefined {
  const trx = em.getTransactionContext();
  return trx ? noted.get(trx) : undefined;
}

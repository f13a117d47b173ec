import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { directTransactionOf } from './direct-transaction.ts';

/**
 * Runs one statement with its parameters bound by the driver (`?` placeholders), in the entity
 * manager's transaction if it has one. `em.execute` binds its parameters too (bound-connection.ts), after
 * rewriting them as MikroORM would (arrays expanded, objects as JSON, literal casts); this hands the
 * values to the driver as they are, for the large JSON parameters of the bulk writes. In a direct
 * transaction (direct-transaction.ts) it runs there.
 */
export async function boundQuery<T = Record<string, unknown>>(em: SqlEntityManager, sql: string, params: unknown[]): Promise<T[]> {
  const direct = directTransactionOf(em);
  if (direct) return (await direct.raw(sql, params)).rows as T[];
  const query = em.getKnex().raw(sql, params as never[]);
  const trx = em.getTransactionContext();
  if (trx) query.transacting(trx);
  const result = (await query) as unknown as { rows?: T[] } | T[];
  return Array.isArray(result) ? result : (result.rows ?? []);
}

import type { SqlEntityManager } from '@mikro-orm/postgresql';

type Knex = ReturnType<SqlEntityManager['getKnex']>;

interface KnexClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  query(connection: unknown, query: { sql: string; bindings: readonly unknown[]; method: string }): Promise<{ response: unknown }>;
}

let transactions = 0;

/**
 * A write transaction on one pooled connection, without the ORM's unit of work: BEGIN, the statements,
 * COMMIT, each sent by the query builder's own client (placeholders bound by the driver, errors worded as
 * for any other statement). It serves the batches of strict units (SnapshotWriter), which write only
 * through statements: measured on PostgreSQL, an ORM transaction around one statement cost about 1.3 ms
 * of CPU, this one about 0.4 ms.
 *
 * An entity manager whose transaction context is a DirectTransaction runs `em.execute` and `boundQuery`
 * on it (bound-connection.ts, bound-query.ts); nothing else of the ORM may be used with it.
 */
export class DirectTransaction {
  private constructor(private readonly knex: Knex, private readonly connection: unknown) {}

  /** Runs `body` in a transaction of its own: committed if it resolves, rolled back if it throws. */
  static async run<T>(knex: Knex, body: (tx: DirectTransaction) => Promise<T>): Promise<T> {
    const client = knex.client as unknown as KnexClient;
    const connection = await client.acquireConnection() as { __knexTxId?: string };
    // Named as the query builder names its transactions, so its query events group this one's statements.
    connection.__knexTxId = `direct${++transactions}`;
    const tx = new DirectTransaction(knex, connection);
    try {
      await tx.raw('begin');
      const result = await body(tx);
      await tx.raw('commit');
      return result;
    } catch (error) {
      // A connection that broke is not asked again: the pool drops it when it next validates it.
      await tx.raw('rollback').catch(() => undefined);
      throw error;
    } finally {
      delete connection.__knexTxId;
      await client.releaseConnection(connection);
    }
  }

  /** One statement, `?` placeholders bound by the driver; the driver's own result (rows, rowCount). */
  async raw(sql: string, params: readonly unknown[] = []): Promise<{ rows: unknown[]; rowCount?: number | null }> {
    const client = this.knex.client as unknown as KnexClient;
    const compiled = params.length === 0 ? { sql, bindings: [] as unknown[] } : this.knex.raw(sql, params as never[]).toSQL();
    const done = await client.query(this.connection, { sql: compiled.sql, bindings: compiled.bindings, method: 'raw' });
    return done.response as { rows: unknown[]; rowCount?: number | null };
  }
}

/** The direct transaction em writes in, if it is one. */
export function directTransactionOf(em: SqlEntityManager): DirectTransaction | undefined {
  const trx = em.getTransactionContext() as unknown;
  return trx instanceof DirectTransaction ? trx : undefined;
}

import type { SqlEntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';

type Knex = ReturnType<SqlEntityManager['getKnex']>;

interface QueryObject { sql: string; bindings: readonly unknown[]; method: string }

interface KnexClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  query(connection: unknown, query: QueryObject): Promise<{ response: unknown }>;
  prepBindings(bindings: readonly unknown[]): unknown[];
  positionBindings(sql: string): string;
  emit(event: 'query', query: object): void;
}

type DriverResult = { rows: unknown[]; rowCount?: number | null };

/** The driver's message writer of a pg connection (the methods pg's own Query uses to prepare a statement). */
interface WireConnection {
  parse(message: { text: string }): void;
  bind(message: Record<string, never>): void;
  execute(message: Record<string, never>): void;
}

/**
 * A statement sent in the same network write as the BEGIN before it, with pg's extended query protocol:
 * Parse/Bind/Execute of BEGIN with no Sync, then the statement's Parse/Bind/Describe/Execute/Sync. The
 * server runs them in order and answers with one ReadyForQuery, so the pair costs one round trip instead
 * of two; should BEGIN fail, the server skips the statement and reports that error. A Query of pg's own,
 * told to skip BEGIN's CommandComplete, so its result is the statement's alone.
 */
class BeginThenQuery extends (pg.Query as unknown as new (config: object) => {
  prepare(connection: WireConnection): void;
  handleCommandComplete(message: unknown, connection: unknown): void;
}) {
  private begun = false;

  constructor(text: string, values: unknown[], callback: (error: Error | null, result: DriverResult) => void) {
    super({ text, values, queryMode: 'extended', callback });
  }

  override prepare(connection: WireConnection): void {
    connection.parse({ text: 'begin' });
    connection.bind({});
    connection.execute({});
    super.prepare(connection);
  }

  override handleCommandComplete(message: unknown, connection: unknown): void {
    if (!this.begun) {
      this.begun = true;
      return;
    }
    super.handleCommandComplete(message, connection);
  }
}

let transactions = 0;

/**
 * A write transaction on one pooled connection, without the ORM's unit of work: BEGIN, the statements,
 * COMMIT, sent by the query builder's own client (placeholders bound by the driver). It serves the batches
 * of strict units (SnapshotWriter), which write only through statements: measured on PostgreSQL, an ORM
 * transaction around one statement cost about 1.3 ms of CPU, this one about 0.4 ms. On PostgreSQL the
 * BEGIN goes in the same network write as the first statement (BeginThenQuery): a transaction of one
 * statement is two round trips, not three. COMMIT stays a round trip of its own, after the statements'
 * answers: a transaction whose connection is lost before then never committed, and one lost during COMMIT
 * is looked up by the id its statements read (SnapshotWriter).
 *
 * An entity manager whose transaction context is a DirectTransaction runs `em.execute` and `boundQuery`
 * on it (bound-connection.ts, bound-query.ts); nothing else of the ORM may be used with it.
 */
export class DirectTransaction {
  /** BEGIN not yet sent: it goes with the first statement. */
  private beginPending = true;

  private constructor(private readonly knex: Knex, private readonly connection: { __knexTxId?: string }) {}

  /** Runs `body` in a transaction of its own: committed if it resolves, rolled back if it throws. */
  static async run<T>(knex: Knex, body: (tx: DirectTransaction) => Promise<T>): Promise<T> {
    const client = knex.client as unknown as KnexClient;
    const connection = await client.acquireConnection() as { __knexTxId?: string };
    // Named as the query builder names its transactions, so its query events group this one's statements.
    connection.__knexTxId = `direct${++transactions}`;
    const tx = new DirectTransaction(knex, connection);
    try {
      const result = await body(tx);
      // A body that ran no statement has nothing to commit (and no BEGIN was sent).
      if (!tx.beginPending) await tx.send('commit', []);
      return result;
    } catch (error) {
      // A connection that broke is not asked again: the pool drops it when it next validates it.
      if (!tx.beginPending) await tx.send('rollback', []).catch(() => undefined);
      throw error;
    } finally {
      delete connection.__knexTxId;
      await client.releaseConnection(connection);
    }
  }

  /** One statement, `?` placeholders bound by the driver; the driver's own result (rows, rowCount). */
  async raw(sql: string, params: readonly unknown[] = []): Promise<DriverResult> {
    const compiled = params.length === 0 ? { sql, bindings: [] as unknown[] } : this.knex.raw(sql, params as never[]).toSQL();
    if (!this.beginPending) return this.send(compiled.sql, compiled.bindings);
    this.beginPending = false;
    if (this.connection instanceof pg.Client) return this.sendAfterBegin(compiled.sql, compiled.bindings);
    // PGlite runs in the process: no round trip to save.
    await this.send('begin', []);
    return this.send(compiled.sql, compiled.bindings);
  }

  private async send(sql: string, bindings: readonly unknown[]): Promise<DriverResult> {
    const client = this.knex.client as unknown as KnexClient;
    const done = await client.query(this.connection, { sql, bindings, method: 'raw' });
    return done.response as DriverResult;
  }

  private sendAfterBegin(sql: string, bindings: readonly unknown[]): Promise<DriverResult> {
    const client = this.knex.client as unknown as KnexClient;
    const text = client.positionBindings(sql);
    const values = client.prepBindings(bindings);
    // The query builder's events, as for any statement it sends: BEGIN, then the statement.
    const { __knexTxId } = this.connection;
    client.emit('query', { __knexTxId, sql: 'begin', bindings: [], method: 'raw' });
    client.emit('query', { __knexTxId, sql: text, bindings: values, method: 'raw' });
    return new Promise((resolve, reject) => {
      (this.connection as pg.Client).query(new BeginThenQuery(text, values, (error, result) => (error ? reject(error) : resolve(result))) as never);
    });
  }
}

/** The direct transaction em writes in, if it is one. */
export function directTransactionOf(em: SqlEntityManager): DirectTransaction | undefined {
  const trx = em.getTransactionContext() as unknown;
  return trx instanceof DirectTransaction ? trx : undefined;
}

import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { channel } from 'node:diagnostics_channel';
import pg from 'pg';
import { knexClientOf, sendPipeline, wireValues, type DriverResult, type KnexClient } from './driver-internals.ts';

type Knex = ReturnType<SqlEntityManager['getKnex']>;

/** A statement waiting for its pipeline: its text with `$n` placeholders, its values ready for the wire. */
interface Queued {
  text: string;
  values: unknown[];
  resolve: (result: DriverResult) => void;
  reject: (error: unknown) => void;
}

/** What directStatements publishes: a statement as sent, and the number of its direct transaction. */
export interface DirectStatement {
  transaction: number;
  sql: string;
}

/**
 * Every statement a direct transaction sends, BEGIN, COMMIT and ROLLBACK included, with its transaction's
 * number: which statements one transaction ran, for tests and diagnostics (nothing is built without a subscriber).
 */
export const directStatements = channel('gs.db.direct-statement');

let transactions = 0;

export interface RunOptions {
  /**
   * PostgreSQL: COMMIT goes in the same network write as the statements the body asks for before it first
   * yields, so the whole transaction is one round trip. For bodies that ask for every statement at once and
   * decide nothing from their answers: a failure must be the server's (a statement's error), since COMMIT is
   * on its way before any answer is back; a statement asked for later is refused (it would run after COMMIT).
   * A connection lost after the write leaves the outcome unknown, and no statement's answer (such as the
   * transaction's id) may have come back: the caller needs another way to learn it (GroupCommitWriter's probes).
   * Ignored on PGlite, which has no round trip to save.
   */
  commitWithStatements?: boolean;
}

function noop(): void {}

/**
 * A write transaction on one pooled connection, without the ORM's unit of work: BEGIN, the statements,
 * COMMIT, sent by the query builder's own client (placeholders bound by the driver). It serves the batches
 * of strict units (GroupCommitWriter), which write only through statements: measured on PostgreSQL, an ORM
 * transaction around one statement cost about 1.3 ms of CPU, this one about 0.4 ms.
 *
 * On PostgreSQL the statements are pipelined: every statement asked for before the running code yields
 * (before any of them is awaited: `Promise.all`, or calls made without `await` between them) goes in one
 * network write and costs one round trip together (driver-internals.ts), and BEGIN goes with the first of them.
 * A transaction of one statement is two round trips; a settlement's five or six statements are two too.
 * COMMIT stays a round trip of its own, after every statement's answer: a transaction whose connection is
 * lost before then never committed, and one lost during COMMIT is looked up by the id its statements read
 * (GroupCommitWriter). Once a statement fails the transaction is aborted, and every later one fails too.
 *
 * An entity manager whose transaction context is a DirectTransaction runs `em.execute` and `boundQuery`
 * on it (bound-connection.ts, bound-query.ts); nothing else of the ORM may be used with it.
 */
export class DirectTransaction {
  /** BEGIN not yet sent: it goes with the first statement. */
  private beginPending = true;
  /** Statements asked for since the last send, sent together once the code now running yields (a microtask; PostgreSQL). */
  private queued: Queued[] = [];
  /** The last statement sent (PGlite, which runs them one at a time in the order asked). */
  private tail: Promise<unknown> = Promise.resolve();
  private readonly client: KnexClient;
  /** The first statement that failed, if one did. */
  private failed: { error: unknown } | undefined;
  /** COMMIT is queued behind the statements (RunOptions.commitWithStatements): no statement may follow it. */
  private commitQueued = false;

  /** This transaction's number in directStatements. */
  private readonly number = ++transactions;

  private constructor(
    private readonly knex: Knex,
    private readonly connection: object,
  ) {
    this.client = knexClientOf(knex);
  }

  /** Runs `body` in a transaction of its own: committed if it resolves, rolled back if it throws. */
  static async run<T>(knex: Knex, body: (tx: DirectTransaction) => Promise<T>, options: RunOptions = {}): Promise<T> {
    const client = knexClientOf(knex);
    const connection = (await client.acquireConnection()) as object;
    const tx = new DirectTransaction(knex, connection);
    try {
      if (options.commitWithStatements && connection instanceof pg.Client) {
        // COMMIT joins the statements the body asked for before it yielded: one network write, one answer.
        // Should a statement fail, the server skips what follows it, COMMIT too, and the rollback below ends it.
        const answered = body(tx);
        const committed = tx.raw('commit');
        tx.commitQueued = true;
        // Both settle before anything else is sent: a ROLLBACK must not overtake a COMMIT still on its way.
        const [ran, commit] = await Promise.allSettled([answered, committed]);
        tx.commitQueued = false;
        if (commit.status === 'rejected') throw ran.status === 'rejected' ? ran.reason : commit.reason;
        if (commit.value.command === 'ROLLBACK') throw tx.failed?.error ?? new Error('the transaction was aborted: COMMIT rolled it back');
        // Committed: a body that failed all the same broke the contract above (it decided something too late).
        if (ran.status === 'rejected') throw new Error('the transaction committed, but its body failed after COMMIT was sent', { cause: ran.reason });
        return ran.value;
      }
      const result = await body(tx);
      // A statement failed and the body went on (it caught the error): the server would turn COMMIT into a
      // ROLLBACK without a word, so the transaction fails here with that statement's error.
      if (tx.failed) throw tx.failed.error;
      // A body that ran no statement has nothing to commit (and no BEGIN was sent).
      if (!tx.beginPending) {
        const done = await tx.raw('commit');
        if (done.command === 'ROLLBACK') throw new Error('the transaction was aborted: COMMIT rolled it back');
      }
      return result;
    } catch (error) {
      // A connection that broke is not asked again: the pool drops it when it next validates it.
      if (!tx.beginPending) await tx.raw('rollback').catch(noop);
      throw error;
    } finally {
      await client.releaseConnection(connection);
    }
  }

  /** One statement, `?` placeholders bound by the driver; the driver's own result (rows, rowCount). */
  raw(sql: string, params: readonly unknown[] = []): Promise<DriverResult> {
    if (this.commitQueued) {
      // It would run after COMMIT, outside the transaction: refused, and the transaction fails with it.
      return this.noted(
        Promise.reject(new Error(`a statement was asked for after its transaction's COMMIT was sent with the statements: ${sql.slice(0, 80)}`)),
      );
    }
    const compiled = params.length === 0 ? { sql, bindings: [] as unknown[] } : this.knex.raw(sql, params as never[]).toSQL();
    if (!(this.connection instanceof pg.Client)) return this.inOrder(compiled.sql, compiled.bindings);
    let values: unknown[];
    try {
      values = wireValues(this.client.prepBindings(compiled.bindings));
    } catch (error) {
      return Promise.reject(error);
    }
    const answered = new Promise<DriverResult>((resolve, reject) => {
      if (this.queued.length === 0) queueMicrotask(() => this.sendQueued());
      this.queued.push({ text: this.client.positionBindings(compiled.sql), values, resolve, reject });
    });
    return this.noted(answered);
  }

  /**
   * The caller awaits its own statement; one it did not await must not end the process when it fails. The
   * first failure is kept: the transaction fails with it even if the body caught it.
   */
  private noted(answered: Promise<DriverResult>): Promise<DriverResult> {
    answered.catch((error: unknown) => {
      this.failed ??= { error };
    });
    return answered;
  }

  /** PGlite runs in the process (no round trip to save): each statement once the one before has answered. */
  private inOrder(sql: string, bindings: readonly unknown[]): Promise<DriverResult> {
    const begin = this.beginPending;
    this.beginPending = false;
    const send = async () => {
      // The query builder's client sends its own query events.
      if (begin) {
        this.published('begin');
        await this.client.query(this.connection, { sql: 'begin', bindings: [], method: 'raw' });
      }
      this.published(sql);
      return (await this.client.query(this.connection, { sql, bindings, method: 'raw' })).response as DriverResult;
    };
    const answered = this.tail.then(send, send);
    this.tail = answered.catch(noop);
    return this.noted(answered);
  }

  private sendQueued(): void {
    const statements = this.queued;
    this.queued = [];
    const begin = this.beginPending;
    this.beginPending = false;
    if (begin) this.sent('begin', []);
    for (const s of statements) this.sent(s.text, s.values);
    sendPipeline(this.connection as pg.Client, begin, statements).then(
      (results) => statements.forEach((s, i) => s.resolve(results[i]!)),
      (error: unknown) => {
        for (const s of statements) s.reject(error);
      },
    );
  }

  /** A statement of a pipeline on its way: the query builder's event, as for any statement it sends, and directStatements'. */
  private sent(sql: string, bindings: readonly unknown[]): void {
    this.client.emit('query', { sql, bindings, method: 'raw' });
    this.published(sql);
  }

  private published(sql: string): void {
    if (directStatements.hasSubscribers) directStatements.publish({ transaction: this.number, sql } satisfies DirectStatement);
  }
}

/** The direct transaction em writes in, if it is one. */
export function directTransactionOf(em: SqlEntityManager): DirectTransaction | undefined {
  const trx = em.getTransactionContext() as unknown;
  return trx instanceof DirectTransaction ? trx : undefined;
}

import type { SqlEntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';

/**
 * The one module that reaches past the public APIs of the database drivers: node-postgres (pg) and the ORM's
 * query builder (knex). Nothing else in the service touches either's internals; test/persistence/driver-internals.test.ts
 * asserts each item listed here, so an upgrade that changes one fails that test by name instead of the service
 * at run time (docs/architecture.md, "Drivers' internals").
 *
 * pg 8.20 sends a query only once the one before it has answered, and its public query objects offer no way
 * to send several statements in one network write; a direct transaction's pipeline (direct-transaction.ts)
 * needs exactly that. So it uses, from pg's internals, only:
 *
 * - `pg.Query` (exported) subclassed, with its methods `prepare(connection)` (overridden: it writes the
 *   query's protocol messages once `submit` is called) and `handleCommandComplete(message, connection)`
 *   (overridden, to leave BEGIN's result out), and its gathering of one result per statement when a query
 *   gets several CommandComplete messages before its ReadyForQuery (as for a multi-statement simple query);
 * - the message writers of the driver's connection that pg's own Query calls: `parse`, `bind`, `describe`,
 *   `execute`, `sync` (typed by @types/pg on `pg.Connection`);
 * - `pg.utils.prepareValue`, pg's conversion of a value for the wire (Dates, Buffers, arrays, objects as JSON),
 *   on the module's object but not documented.
 *
 * pg 8.23 has pipelining as public API (`new Pool({ pipeline: true })`, each query with its own Sync): once
 * the service is on it, this module becomes plain `client.query` calls not awaited one by one
 * (docs/generations.md, "One module for the drivers' internals").
 *
 * From knex (the query builder under MikroORM), whose documented API has no way to hold one pooled
 * connection outside a knex transaction, nor to see a query's transaction or the pool's counts:
 *
 * - the client's `acquireConnection()`, `releaseConnection(connection)`, `query(connection, queryObject)`,
 *   `prepBindings(bindings)`, `positionBindings(sql)` and `emit('query', …)` (knexClientOf): a direct
 *   transaction's connection and statements, sent without knex's transaction and its per-statement waits;
 * - a builder's `client.transacting` (madeInTransaction), true when it was bound to a knex transaction;
 * - the client's `pool`, a tarn pool with `numUsed()`, `numFree()` and `numPendingAcquires()` (knexPoolOf),
 *   for the connection gauges.
 */

/** The pg version whose internals this module was checked against (the internals test holds it to the installed one). */
export const PG_VERSION_CHECKED = '8.20.0';

/** pg's own conversion of a value for the wire, as its Query applies it. */
const { prepareValue } = (pg as unknown as { utils: { prepareValue: (value: unknown) => unknown } }).utils;

export type DriverResult = { rows: unknown[]; rowCount?: number | null; command?: string };

/** The driver's message writer of a pg connection (the methods pg's own Query uses to send a statement). */
export interface WireConnection {
  parse(message: { text: string; name?: string }): void;
  bind(message: { statement?: string; values?: unknown[] }): void;
  describe(message: { type: 'P'; name: string }): void;
  execute(message: Record<string, never>): void;
  sync(): void;
}

/** A statement of a pipeline: its text with `$n` placeholders, its values ready for the wire (wireValues). */
export interface PipelinedStatement {
  text: string;
  values: unknown[];
}

/** Values as pg sends them; throws what pg would (a circular toPostgres, say). */
export function wireValues(values: readonly unknown[]): unknown[] {
  return values.map((value) => prepareValue(value));
}

/** Statements a connection keeps prepared (by text) beyond which further ones are sent unnamed. */
const NAMED_PER_CONNECTION = 256;
let statementNames = 0;
/** Per pooled connection: the statements prepared on it, text → name. */
const preparedOn = new WeakMap<object, Map<string, string>>();

/**
 * Statements sent in one network write with the extended query protocol and answered with one ReadyForQuery:
 * Parse/Bind/Describe/Execute of each, then one Sync (BEGIN first, with no Describe, when asked). The server
 * runs them in order; should one fail, it skips the rest and reports that error, so none after it takes
 * effect. A Query of pg's own, whose results are one per statement, BEGIN's left out.
 */
export class PipelineQuery extends (pg.Query as unknown as new (
  config: object,
) => {
  prepare(connection: WireConnection): void;
  handleCommandComplete(message: unknown, connection: unknown): void;
}) {
  private beginAnswered: boolean;
  /** The texts this query prepared first: forgotten if it fails (the server may have skipped their Parse). */
  readonly preparedHere: string[] = [];

  constructor(
    readonly begin: boolean,
    readonly statements: readonly PipelinedStatement[],
    private readonly prepared: Map<string, string>,
    callback: (error: Error | null, result: DriverResult | DriverResult[]) => void,
  ) {
    // pg's checks want a text: the first statement's (what the query's spans and logs show).
    super({ text: statements[0]!.text, queryMode: 'extended', callback });
    this.beginAnswered = !begin;
  }

  override prepare(connection: WireConnection): void {
    if (this.begin) {
      connection.parse({ text: 'begin' });
      connection.bind({});
      connection.execute({});
    }
    for (const statement of this.statements) {
      // A statement is parsed and planned once per connection (a named prepared statement, which the server
      // plans generically once that costs no more), then only bound: about a third of a write's server time.
      let name = this.prepared.get(statement.text);
      if (name === undefined) {
        if (this.prepared.size < NAMED_PER_CONNECTION) {
          name = `gs_dt_${++statementNames}`;
          this.prepared.set(statement.text, name);
          this.preparedHere.push(statement.text);
        } else {
          name = '';
        }
        connection.parse({ text: statement.text, name });
      }
      connection.bind({ statement: name, values: statement.values });
      connection.describe({ type: 'P', name: '' });
      connection.execute({});
    }
    connection.sync();
  }

  override handleCommandComplete(message: unknown, connection: unknown): void {
    if (!this.beginAnswered) {
      this.beginAnswered = true;
      return;
    }
    super.handleCommandComplete(message, connection);
  }
}

/**
 * Sends `statements` (BEGIN first if `begin`) on `client` in one network write; resolves with each
 * statement's result, in order, or rejects with the error that stopped them (every statement of the write
 * fails with it: the server ran none after it, and the transaction is aborted).
 */
export function sendPipeline(client: pg.Client, begin: boolean, statements: readonly PipelinedStatement[]): Promise<DriverResult[]> {
  let prepared = preparedOn.get(client);
  if (!prepared) {
    prepared = new Map();
    preparedOn.set(client, prepared);
  }
  const names = prepared;
  return new Promise((resolve, reject) => {
    const query: PipelineQuery = new PipelineQuery(begin, statements, names, (error, result) => {
      if (error) {
        // Parsed or skipped, the statements this write prepared get new names next time (one the server did
        // parse stays, unused, until the connection closes).
        for (const text of query.preparedHere) names.delete(text);
        reject(error);
        return;
      }
      const results = Array.isArray(result) ? result : [result];
      resolve(statements.map((_, i) => results[i] ?? { rows: [], rowCount: 0 }));
    });
    client.query(query as never);
  });
}

type Knex = ReturnType<SqlEntityManager['getKnex']>;

/** A statement as knex's client runs it. */
export interface KnexQueryObject {
  sql: string;
  bindings: readonly unknown[];
  method: string;
}

/** The methods of knex's client a direct transaction calls (none of them in knex's documentation). */
export interface KnexClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  query(connection: unknown, query: KnexQueryObject): Promise<{ response: unknown }>;
  prepBindings(bindings: readonly unknown[]): unknown[];
  positionBindings(sql: string): string;
  emit(event: 'query', query: object): void;
}

/** knex's client, with the methods a direct transaction calls. */
export function knexClientOf(knex: Knex): KnexClient {
  return knex.client as unknown as KnexClient;
}

/** Whether a knex query builder or raw statement was bound to a knex transaction (its client is the transaction's). */
export function madeInTransaction(query: object): boolean {
  return Boolean((query as { client?: { transacting?: unknown } }).client?.transacting);
}

/** The counts of a tarn pool, as knex's client holds one. */
export interface KnexPool {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
}

/** knex's pool of connections, or undefined when its client has none (PGlite). */
export function knexPoolOf(knex: Knex): KnexPool | undefined {
  return (knex.client as { pool?: KnexPool | null }).pool ?? undefined;
}

import { randomBytes } from 'node:crypto';
import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Database } from './database.ts';
import { availabilityOf, isDatabaseUnreachable, pause, type DatabaseAvailability } from './availability.ts';
import { currentWriteClaim, WriteClaims, type WriteFence } from './write-claims.ts';
import { notedTransactionId } from './transaction-id.ts';
import { DirectTransaction } from './direct-transaction.ts';
import { boundQuery } from './bound-query.ts';

/** One actor's writes; runs inside the batch's transaction and must touch only the database. */
export type WriteUnit = (em: SqlEntityManager) => Promise<void>;

export interface GroupCommitWriterOptions {
  /**
   * How long the first write of an idle writer waits for company before its batch commits; 0 (the
   * service's default) commits it at once, on the next turn of the event loop, so only the writes queued
   * in the same turn share it. Either way, writes queued while a batch commits gather for the next one,
   * which starts as soon as that commit ends: the commit in flight is the window.
   */
  windowMs: number;
  maxBatch: number;
  tracer: Tracer;
  /** Cluster mode: called once per transaction, before it commits, with the claims of its units. */
  fence?: WriteFence;
  /** Called after each batch commits, with its size and how long it took (the service's metrics). */
  onCommit?: (size: number, seconds: number) => void;
}

export interface WriterStats {
  units: number;
  batches: number;
  failedUnits: number;
  /** Commits tried again because the database could not be reached. */
  retries: number;
  lastBatchSize: number;
  lastCommitMs: number;
}

interface Pending {
  unit: WriteUnit;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** `db.commit.wait` spans, each in its writer's trace: from the write until its batch committed or failed. */
  waits: Span[];
  strict: boolean;
  claims: WriteClaims | undefined;
  probe: CommitProbe | undefined;
}

/**
 * Whether a unit's writes committed, read in a transaction of its own (em) once the database answers again:
 * for instance, whether a row the unit inserts exists.
 */
export type CommitProbe = (em: SqlEntityManager) => Promise<boolean>;

export interface WriteOptions {
  /**
   * The unit lets every failed statement throw (it catches none) and persists nothing through the
   * entity manager's unit of work: a batch of such units needs neither the final flush nor the check
   * statement that catches a transaction some unit left aborted.
   */
  strict?: boolean;
  /**
   * The shard leases the unit writes under (cluster mode), read when the batch commits, so a unit shared by
   * many actors may add theirs until then. Default: the claim of the calling actor (write-claims.ts), if any.
   */
  claims?: WriteClaims;
  /** The wait spans of the callers a shared unit serves, added to until it commits (default: the caller's own). */
  waits?: Span[];
  /**
   * A strict unit that asks for all its statements at once (before it first awaits) and decides nothing from
   * their answers, so that every way it can fail is a statement's error. On PostgreSQL a batch of such units
   * only sends COMMIT with their statements: one round trip (DirectTransaction's commitWithStatements). Should
   * the connection be lost then, the writer learns what became of the batch from the probe of its first unit.
   */
  probe?: CommitProbe;
}

export class WriterClosedError extends Error {
  constructor() {
    super('the group-commit writer is closed');
    this.name = 'WriterClosedError';
  }
}

/**
 * Group commit: the writes of many actors go into one transaction, and each waiter is answered
 * only after that transaction has committed. While one batch commits, the next one gathers.
 * When a batch fails, its units are retried one transaction each, so one bad write fails alone.
 *
 * A batch that fails because the database cannot be reached is not failed: the same batch is tried again,
 * after a backoff (100 ms doubling to 5 s, cut short when the database answers again), until it commits or
 * the writer closes; its waiters simply wait, and the batches behind it wait their turn. If the connection
 * was lost during COMMIT, the transaction may have committed all the same: on PostgreSQL each batch notes
 * its transaction id, and before trying again the writer asks the server what became of it
 * (txid_status), so a committed batch is never applied twice.
 */
export class GroupCommitWriter {
  private queue: Pending[] = [];
  private committing = false;
  private scheduled = false;
  private windowTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private idleWaiters: Array<() => void> = [];
  /** One promise per unit not yet committed or refused (settling either way); what flush waits for. */
  private readonly unsettled = new Set<Promise<void>>();
  /** Units of writeAfter still waiting for their delay: each function puts its unit in the queue now. */
  private readonly held = new Set<() => void>();
  private readonly lanes: GroupCommitWriter[] = [];
  readonly stats: WriterStats = { units: 0, batches: 0, failedUnits: 0, retries: 0, lastBatchSize: 0, lastCommitMs: 0 };
  private readonly availability: DatabaseAvailability;
  /** Set by close: a batch the database cannot take is then failed, not tried again. */
  private closing = false;
  private readonly closingSignal: Promise<void>;
  private signalClosing!: () => void;

  /** db.namespace of the batch spans: the database's name. */
  private readonly namespace: string;
  /** The entity manager of this writer's direct transactions, made on first use (directEntityManager). */
  private directEm: SqlEntityManager | undefined;

  constructor(
    private readonly db: Database,
    private readonly options: GroupCommitWriterOptions,
  ) {
    this.availability = availabilityOf(db);
    this.namespace = String(db.orm?.config.get('dbName') ?? '');
    this.closingSignal = new Promise((resolve) => {
      this.signalClosing = resolve;
    });
  }

  /** Resolves once the unit's writes are committed; rejects if they were rolled back. */
  write(unit: WriteUnit, options: WriteOptions = {}): Promise<void> {
    if (this.closed) return Promise.reject(new WriterClosedError());
    const written = new Promise<void>((resolve, reject) => {
      let waits = options.waits;
      if (!waits) {
        const wait = this.startWait();
        waits = wait ? [wait] : [];
      }
      const claims = options.claims ?? (this.options.fence ? claimsOfCaller() : undefined);
      this.queue.push({ unit, resolve, reject, waits, strict: options.strict === true, claims, probe: options.probe });
      this.schedule();
    });
    const settled = written.then(noop, noop);
    this.unsettled.add(settled);
    void settled.then(() => this.unsettled.delete(settled));
    return written;
  }

  /**
   * The caller's `db.commit.wait` span, if it is traced: its trace then shows how long its write waited for
   * its batch to commit, as a child span of the caller linked to the batch (or the batch's parent, when the
   * batch serves this write alone). For a unit shared by many callers (BulkWrite), each adds its own.
   */
  startWait(): Span | undefined {
    return trace.getActiveSpan()?.isRecording() ? this.options.tracer.startSpan('db.commit.wait', { kind: SpanKind.INTERNAL }) : undefined;
  }

  /**
   * Enough is waiting: commit without waiting for the rest of the window. Under a burst of requests the
   * window timer fires only once the event loop has handled the whole burst; committing the first part
   * at once lets the database work on it while the rest of the burst is still being handled.
   */
  hurry(): void {
    if (this.committing || !this.scheduled || this.windowTimer === undefined) return;
    clearTimeout(this.windowTimer);
    this.windowTimer = undefined;
    this.scheduled = false;
    void context.with(ROOT_CONTEXT, () => this.drain());
  }

  /**
   * Like write, but the unit joins the queue only after `delayMs` (or at the next flush or close, if
   * sooner): for writes nobody waits on, so that one unit gathers what many actors record meanwhile.
   */
  writeAfter(delayMs: number, unit: WriteUnit, options: WriteOptions = {}): Promise<void> {
    if (this.closed) return Promise.reject(new WriterClosedError());
    return new Promise<void>((resolve, reject) => {
      const enqueue = () => {
        clearTimeout(timer);
        this.held.delete(enqueue);
        this.write(unit, options).then(resolve, reject);
      };
      const timer = setTimeout(enqueue, delayMs);
      this.held.add(enqueue);
    });
  }

  /** Nothing queued, gathering or committing. */
  get idle(): boolean {
    return !this.committing && !this.scheduled && this.queue.length === 0;
  }

  /**
   * Lane `index` of this writer: lane 0 is the writer itself; each other lane is a writer of its own, made
   * on first use, whose batches commit in their own transactions beside this one's. Only for writes that
   * commute with everything that may commit beside them (see BulkWrite's lanes). Flushed and closed with
   * this writer.
   */
  lane(index: number): GroupCommitWriter {
    if (index === 0) return this;
    while (this.lanes.length < index) this.lanes.push(new GroupCommitWriter(this.db, this.options));
    return this.lanes[index - 1]!;
  }

  /**
   * Resolves when everything queued so far (in every lane) has been committed or refused. Writes queued
   * after the call are not waited for, so a flush ends even while other actors keep the writer busy.
   */
  flush(): Promise<void> {
    for (const enqueue of [...this.held]) enqueue();
    const own = this.unsettled.size === 0 ? Promise.resolve() : Promise.all([...this.unsettled]).then(noop);
    if (this.lanes.length === 0) return own;
    return Promise.all([own, ...this.lanes.map((lane) => lane.flush())]).then(noop);
  }

  /** Resolves when nothing is queued, gathering or committing (in every lane). */
  private whenIdle(): Promise<void> {
    for (const enqueue of [...this.held]) enqueue();
    const own = this.idle ? Promise.resolve() : new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    if (this.lanes.length === 0) return own;
    return Promise.all([own, ...this.lanes.map((lane) => lane.whenIdle())]).then(noop);
  }

  /**
   * Commits what is queued and then refuses writes. A batch still waiting for an unreachable database is
   * failed (its waiters get the error) instead of being tried again.
   */
  async close(): Promise<void> {
    this.stopRetrying();
    await this.whenIdle();
    await Promise.all(this.lanes.map((lane) => lane.close()));
    this.closed = true;
  }

  private stopRetrying(): void {
    this.closing = true;
    this.signalClosing();
    for (const lane of this.lanes) lane.stopRetrying();
  }

  private schedule(): void {
    if (this.committing || this.scheduled) return;
    this.scheduled = true;
    const start = () => {
      this.scheduled = false;
      this.windowTimer = undefined;
      // The timer was armed inside the first writer's span; a batch serves many writers, so its span is
      // a root linked to each of them, not a child of whichever request happened to come first.
      void context.with(ROOT_CONTEXT, () => this.drain());
    };
    if (this.options.windowMs > 0) this.windowTimer = setTimeout(start, this.options.windowMs);
    // setImmediate, not a microtask: the writes of every request handled in this turn of the loop join.
    else setImmediate(start);
  }

  private async drain(): Promise<void> {
    this.committing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.options.maxBatch);
        await this.commit(batch);
      }
    } finally {
      this.committing = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  private async commit(batch: Pending[]): Promise<void> {
    // A batch that serves one traced write is a child of its wait span, in that writer's trace. One that
    // serves several is a root span linked to each wait span, and each wait span links back to it: no
    // trace holds another request's commit as its own, and each shows its wait.
    const waits = batch.flatMap((p) => p.waits);
    const parent = waits.length === 1 ? trace.setSpan(ROOT_CONTEXT, waits[0]!) : ROOT_CONTEXT;
    const span = this.options.tracer.startSpan(
      'db.batch',
      {
        kind: SpanKind.CLIENT,
        links: waits.length > 1 ? waits.map((w) => ({ context: w.spanContext() })) : [],
        attributes: {
          'db.system.name': 'postgresql',
          'db.namespace': this.namespace,
          'db.operation.name': 'BATCH',
          'db.operation.batch.size': batch.length,
        },
      },
      parent,
    );
    if (waits.length > 1) for (const wait of waits) wait.addLink({ context: span.spanContext() });
    const started = performance.now();
    try {
      // Its statements (pg instrumentation, PGlite's spans) are its children.
      await context.with(trace.setSpan(parent, span), () => this.commitBatch(batch));
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute('error.type', errorType(error));
      span.end();
      if (batch.length === 1 || isDatabaseUnreachable(error)) {
        // Unreachable here means the writer is closing: every unit fails alike.
        this.stats.failedUnits += batch.length;
        for (const pending of batch) {
          for (const wait of pending.waits) {
            wait.setStatus({ code: SpanStatusCode.ERROR });
            wait.setAttribute('error.type', errorType(error));
            wait.end();
          }
          pending.reject(error);
        }
      } else {
        // Isolate the failing write: every other unit gets its own transaction.
        for (const pending of batch) await this.commit([pending]);
      }
      return;
    }
    this.record(batch.length, started);
    span.setStatus({ code: SpanStatusCode.OK });
    // The batch's span ends before the waits it served: each wait, its parent or linked, ends after it.
    span.end();
    for (const pending of batch) {
      for (const wait of pending.waits) wait.end();
      pending.resolve();
    }
  }

  /** Commits the batch in one transaction, trying again while the database cannot be reached (unless closing). */
  private async commitBatch(batch: Pending[]): Promise<void> {
    const postgres = this.db.kind === 'postgres';
    // A batch of strict units writes only through statements: it needs no unit of work, and runs on a
    // direct transaction (about a third of the CPU of the ORM's). Any other batch runs in the ORM's own.
    const strict = batch.every((p) => p.strict);
    // A batch whose units all have a probe commits in one round trip.
    if (postgres && strict && batch.every((p) => p.probe)) return this.commitInOneRoundTrip(batch);
    let txid: string | undefined;
    const inTransaction = async (em: SqlEntityManager): Promise<void> => {
      for (const pending of batch) await pending.unit(em);
      if (!strict) await em.flush();
      // A unit that caught the error of a failed statement leaves the transaction aborted, and the
      // server then answers COMMIT with a silent ROLLBACK: one more statement makes such a batch fail
      // here instead of acknowledging writes that were never committed. On PostgreSQL that statement
      // also notes the transaction's id, in case the connection is lost during COMMIT. In cluster mode
      // the fence is that statement (it reads the id too), the last before COMMIT.
      let fencedTxid: string | undefined;
      if (this.options.fence) {
        const claims = new WriteClaims();
        for (const pending of batch) claims.addAll(pending.claims);
        // One call for every shard of the batch, in shard order: a node that lost one cannot commit.
        if (claims.size > 0) fencedTxid = (await this.options.fence(em, claims.sorted())) ?? undefined;
      }
      // A batch of strict units (each failed statement threw) needs no check statement: a unit's own
      // statement may have read the id already (noteTransactionId), and then the writer asks nothing more.
      if (postgres)
        txid =
          fencedTxid ?? (strict ? notedTransactionId(em) : undefined) ?? (await em.execute<Array<{ id: string }>>('select txid_current()::text as id'))[0]!.id;
      else if (!strict) await em.execute('select 1');
    };
    return this.untilCommitted(
      async () => {
        txid = undefined;
        if (strict) {
          const em = this.directEntityManager();
          await DirectTransaction.run(em.getKnex(), (tx) => {
            em.setTransactionContext(tx as never);
            return inTransaction(em);
          });
        } else {
          await this.db.em().transactional(inTransaction);
        }
      },
      (lost) => txid !== undefined && this.committedAnyway(txid, lost),
    );
  }

  /**
   * A batch of probed units: each asks for its statements now, then the fence (cluster mode), then COMMIT, all
   * in one network write. A unit refused by the fence or failing fails the whole transaction on the server.
   * If the connection is lost, the transaction's id is not known (the answers come back only after COMMIT):
   * once the database answers again, the first unit's probe tells whether the batch committed, asked under
   * the batch's advisory lock, which a transaction the server is still running holds until it ends.
   */
  private commitInOneRoundTrip(batch: Pending[]): Promise<void> {
    const lockKey = batchLockKey();
    const claims = new WriteClaims();
    for (const pending of batch) claims.addAll(pending.claims);
    return this.untilCommitted(
      async () => {
        const em = this.directEntityManager();
        await DirectTransaction.run(
          em.getKnex(),
          (tx) => {
            em.setTransactionContext(tx as never);
            const asked: Array<Promise<unknown>> = [boundQuery(em, 'select pg_advisory_xact_lock(?::bigint)', [lockKey])];
            for (const pending of batch) asked.push(pending.unit(em));
            if (this.options.fence && claims.size > 0) asked.push(this.options.fence(em, claims.sorted()));
            return Promise.all(asked);
          },
          { commitWithStatements: true },
        );
      },
      (lost) => this.probedAnyway(batch[0]!.probe!, lockKey, lost),
    );
  }

  /**
   * The entity manager a direct transaction of this writer runs on: one per writer (each lane is a writer of
   * its own), kept from batch to batch instead of forked for each. A fork cost about 0.1 ms of every create's
   * path on a loaded 2-core machine, before its statements could leave. Keeping it is safe: a writer commits
   * one batch at a time, and a direct transaction's units write only through statements (strict), so the
   * entity manager holds nothing between batches but the transaction context, which each batch sets anew.
   */
  private directEntityManager(): SqlEntityManager {
    this.directEm ??= this.db.em();
    return this.directEm;
  }

  /**
   * Runs `attempt` until it commits, trying again while the database cannot be reached (unless closing).
   * After a failure that lost the connection, `inDoubt` tells whether the attempt committed all the same.
   */
  private async untilCommitted(attempt: () => Promise<void>, inDoubt: (lost: unknown) => boolean | Promise<boolean>): Promise<void> {
    for (let n = 0; ; n++) {
      try {
        await attempt();
        this.availability.up();
        return;
      } catch (error) {
        if (!isDatabaseUnreachable(error) || this.closing) throw error;
        this.availability.down(error);
        this.stats.retries++;
        if (await inDoubt(error)) {
          this.availability.up();
          return;
        }
        await this.backoff(n);
        if (this.closing) throw error;
      }
    }
  }

  /** Whether a batch that lost its connection committed: its probe, asked once its advisory lock is free. */
  private async probedAnyway(probe: CommitProbe, lockKey: string, lost: unknown): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      await this.backoff(attempt);
      if (this.closing) throw lost;
      try {
        return await this.db.em().transactional(async (em) => {
          // Waits for the batch's transaction, should the server still be running it; then reads what it left.
          await boundQuery(em, 'select pg_advisory_xact_lock(?::bigint)', [lockKey]);
          return probe(em);
        });
      } catch (error) {
        if (!isDatabaseUnreachable(error)) throw lost;
        this.availability.down(error);
      }
    }
  }

  /**
   * Whether the transaction `txid`, whose COMMIT lost its connection, committed all the same: asked once the
   * database answers again. A transaction the server had not committed when it stopped is reported aborted.
   */
  private async committedAnyway(txid: string, lost: unknown): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      await this.backoff(attempt);
      if (this.closing) throw lost;
      try {
        const [row] = await this.db.em().execute<Array<{ status: string | null }>>('select txid_status(?::bigint) as status', [txid]);
        if (row?.status === 'committed') return true;
        // Still in progress: the server has not yet noticed that the connection is gone.
        if (row?.status !== 'in progress') return false;
      } catch (error) {
        if (!isDatabaseUnreachable(error)) throw lost;
        this.availability.down(error);
      }
    }
  }

  /** Waits before trying again: the backoff of the attempt-th failure, cut short when the database answers or the writer closes. */
  private backoff(attempt: number): Promise<void> {
    return Promise.race([pause(this.availability, attempt), this.closingSignal]);
  }

  private record(size: number, started: number): void {
    this.stats.batches++;
    this.stats.units += size;
    this.stats.lastBatchSize = size;
    this.stats.lastCommitMs = performance.now() - started;
    this.options.onCommit?.(size, this.stats.lastCommitMs / 1000);
  }
}

function noop(): void {}

/** Where this process's advisory lock keys start: random, so two processes' keys meet only by a 2⁻⁶⁴-scale chance. */
const lockKeyBase = randomBytes(8).readBigInt64BE();
let lockKeys = 0n;

/** An advisory lock key (bigint, as text) of one batch: the next of this process's. */
function batchLockKey(): string {
  return BigInt.asIntN(64, lockKeyBase + ++lockKeys).toString();
}

/** error.type: the driver's SQLSTATE when there is one, else the error's class name. */
function errorType(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && code !== '' ? code : ((error as Error | undefined)?.name ?? 'Error');
}

function claimsOfCaller(): WriteClaims | undefined {
  const claim = currentWriteClaim();
  return claim ? new WriteClaims().add(claim) : undefined;
}

import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Link, type Tracer } from '@opentelemetry/api';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Database } from './database.ts';

/** One actor's writes; runs inside the batch's transaction and must touch only the database. */
export type WriteUnit = (em: SqlEntityManager) => Promise<void>;

export interface SnapshotWriterOptions {
  /** How long the first write of an idle writer waits for company before its batch commits. */
  windowMs: number;
  maxBatch: number;
  tracer: Tracer;
}

export interface WriterStats {
  units: number;
  batches: number;
  failedUnits: number;
  lastBatchSize: number;
  lastCommitMs: number;
}

interface Pending {
  unit: WriteUnit;
  resolve: () => void;
  reject: (error: unknown) => void;
  link: Link | undefined;
  strict: boolean;
}

export interface WriteOptions {
  /**
   * The unit lets every failed statement throw (it catches none) and persists nothing through the
   * entity manager's unit of work: a batch of such units needs neither the final flush nor the check
   * statement that catches a transaction some unit left aborted.
   */
  strict?: boolean;
}

export class WriterClosedError extends Error {
  constructor() {
    super('the snapshot writer is closed');
    this.name = 'WriterClosedError';
  }
}

/**
 * Group commit: the writes of many actors go into one transaction, and each waiter is answered
 * only after that transaction has committed. While one batch commits, the next one gathers.
 * When a batch fails, its units are retried one transaction each, so one bad write fails alone.
 */
export class SnapshotWriter {
  private queue: Pending[] = [];
  private committing = false;
  private scheduled = false;
  private windowTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private idleWaiters: Array<() => void> = [];
  /** Units of writeAfter still waiting for their delay: each function puts its unit in the queue now. */
  private readonly held = new Set<() => void>();
  private readonly lanes: SnapshotWriter[] = [];
  readonly stats: WriterStats = { units: 0, batches: 0, failedUnits: 0, lastBatchSize: 0, lastCommitMs: 0 };

  constructor(private readonly db: Database, private readonly options: SnapshotWriterOptions) {}

  /** Resolves once the unit's writes are committed; rejects if they were rolled back. */
  write(unit: WriteUnit, options: WriteOptions = {}): Promise<void> {
    if (this.closed) return Promise.reject(new WriterClosedError());
    return new Promise<void>((resolve, reject) => {
      const spanContext = trace.getActiveSpan()?.spanContext();
      this.queue.push({ unit, resolve, reject, link: spanContext ? { context: spanContext } : undefined, strict: options.strict === true });
      this.schedule();
    });
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
  writeAfter(delayMs: number, unit: WriteUnit): Promise<void> {
    if (this.closed) return Promise.reject(new WriterClosedError());
    return new Promise<void>((resolve, reject) => {
      const enqueue = () => {
        clearTimeout(timer);
        this.held.delete(enqueue);
        this.write(unit).then(resolve, reject);
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
  lane(index: number): SnapshotWriter {
    if (index === 0) return this;
    while (this.lanes.length < index) this.lanes.push(new SnapshotWriter(this.db, this.options));
    return this.lanes[index - 1]!;
  }

  /** Resolves when everything queued so far (in every lane) has been committed or refused. */
  flush(): Promise<void> {
    for (const enqueue of [...this.held]) enqueue();
    const own = this.idle ? Promise.resolve() : new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    if (this.lanes.length === 0) return own;
    return Promise.all([own, ...this.lanes.map((lane) => lane.flush())]).then(() => undefined);
  }

  async close(): Promise<void> {
    await this.flush();
    await Promise.all(this.lanes.map((lane) => lane.close()));
    this.closed = true;
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
    const links = batch.flatMap((p) => (p.link ? [p.link] : []));
    const span = this.options.tracer.startSpan('db.batch', {
      kind: SpanKind.CLIENT,
      links,
      attributes: { 'db.system': 'postgresql', 'db.operation.batch.size': batch.length },
    });
    const started = performance.now();
    try {
      await this.db.em().transactional(async (em) => {
        for (const pending of batch) await pending.unit(em);
        // A unit that caught the error of a failed statement leaves the transaction aborted, and the
        // server then answers COMMIT with a silent ROLLBACK: one more statement makes such a batch fail
        // here instead of acknowledging writes that were never committed.
        if (!batch.every((p) => p.strict)) {
          await em.flush();
          await em.execute('select 1');
        }
      });
      this.record(batch.length, started);
      for (const pending of batch) pending.resolve();
      span.setStatus({ code: SpanStatusCode.OK });
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
      if (batch.length === 1) {
        this.stats.failedUnits++;
        batch[0]!.reject(error);
      } else {
        // Isolate the failing write: every other unit gets its own transaction.
        for (const pending of batch) await this.commit([pending]);
      }
    } finally {
      span.end();
    }
  }

  private record(size: number, started: number): void {
    this.stats.batches++;
    this.stats.units += size;
    this.stats.lastBatchSize = size;
    this.stats.lastCommitMs = performance.now() - started;
  }
}

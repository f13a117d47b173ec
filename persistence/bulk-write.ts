import type { Span } from '@opentelemetry/api';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { GroupCommitWriter, WriteOptions } from './group-commit.ts';
import { currentWriteClaim, WriteClaims } from './write-claims.ts';

/** Writes many rows of one kind with a constant number of statements. */
export type BulkApply<R> = (em: SqlEntityManager, rows: R[]) => Promise<void>;

/** Whether the rows of a unit whose connection was lost were committed (GroupCommitWriter's CommitProbe). */
export type BulkProbe<R> = (em: SqlEntityManager, rows: R[]) => Promise<boolean>;

export interface BulkWriteOptions<R> {
  /** Lanes of the writer the batches go to (see below); default 1. */
  lanes?: number;
  /**
   * An apply that asks for all its statements at once and decides nothing from their answers (every failure
   * is a statement's) may have a probe: its batches then commit in one round trip (WriteOptions.probe).
   */
  probe?: BulkProbe<R>;
}
// An apply lets every failed statement throw and writes only through statements: its units are strict
// (GroupCommitWriter's WriteOptions).

interface Gathering<R> {
  /** Its place in the writer's queue: gatherings of every BulkWrite are numbered in the order they queue. */
  position: number;
  rows: R[];
  committed: Promise<void>;
  writer: GroupCommitWriter;
  /** The shard leases of the actors whose rows joined (cluster mode). */
  claims: WriteClaims;
  /** The commit-wait spans of the traced callers whose rows joined. */
  waits: Span[];
}

/** Rows gathered for one statement beyond which the writer commits without waiting for its window to end. */
const HURRY_ROWS = 32;

let positions = 0;

/** A row added: its commit, and the queue position of the unit that writes it. */
export interface Added {
  committed: Promise<void>;
  position: number;
}

/**
 * Rows of one kind that many actors write in the same group commit, written together: the first row
 * of a batch queues one unit in the writer, and every row added before that unit runs joins it, so a
 * batch of N rows costs the statements of one. Each row's promise resolves once its batch commits.
 *
 * If the shared unit fails, each of its rows is written again as a unit of its own (the writer isolates
 * failing units), so one bad row fails alone and the others still commit. `apply` must be right for any
 * subset of rows, and its statements must not depend on other units of the same transaction.
 *
 * With `lanes` > 1, a new batch goes to a lane of the writer that is idle (GroupCommitWriter.lane), so it
 * commits while the previous batch is still committing: for rows whose writes commute with everything
 * else (inserts of new rows, balance deltas), and whose statements lock shared rows in a fixed order.
 */
export class BulkWrite<R> {
  private open: Gathering<R> | undefined;
  private next = 0;

  private readonly lanes: number;
  private readonly probe: BulkProbe<R> | undefined;

  constructor(
    private readonly writer: GroupCommitWriter,
    private readonly apply: BulkApply<R>,
    options: BulkWriteOptions<R> = {},
  ) {
    this.lanes = options.lanes ?? 1;
    this.probe = options.probe;
  }

  private probeOf(rows: R[]): WriteOptions['probe'] {
    const probe = this.probe;
    return probe && ((em) => probe(em, rows));
  }

  add(row: R): Promise<void> {
    return this.addAfter(row).committed;
  }

  /**
   * Adds a row whose write must not run before the unit at queue position `after` (an earlier row of the same
   * thing written by another BulkWrite of the same lane): it joins the gathering only if that gathering queued
   * after it, else it starts a new one, queued behind. The writer runs its queue in order, so the row then
   * commits in the same transaction after that unit's statements, or in a later one.
   */
  addAfter(row: R, after = 0): Added {
    let gathering = this.open;
    if (!gathering || gathering.position < after) {
      const created: Gathering<R> = {
        position: ++positions,
        rows: [],
        committed: Promise.resolve(),
        writer: this.pickLane(),
        claims: new WriteClaims(),
        waits: [],
      };
      created.committed = created.writer.write(
        async (em) => {
          // Rows added from now on belong to the next batch.
          if (this.open === created) this.open = undefined;
          await this.apply(em, created.rows);
        },
        { strict: true, claims: created.claims, waits: created.waits, probe: this.probeOf(created.rows) },
      );
      this.open = created;
      gathering = created;
    }
    const claim = currentWriteClaim();
    gathering.claims.add(claim);
    const wait = gathering.writer.startWait();
    if (wait) gathering.waits.push(wait);
    gathering.rows.push(row);
    if (gathering.rows.length === HURRY_ROWS) gathering.writer.hurry();
    const rows = gathering.rows;
    const committed = gathering.committed.catch((error: unknown) => (rows.length === 1 ? Promise.reject(error) : this.alone(row, claim)));
    return { committed, position: gathering.position };
  }

  /** An idle lane if there is one, else the next in turn. */
  private pickLane(): GroupCommitWriter {
    for (let i = 0; i < this.lanes; i++) {
      const lane = this.writer.lane((this.next + i) % this.lanes);
      if (lane.idle) {
        this.next = (this.next + i + 1) % this.lanes;
        return lane;
      }
    }
    const lane = this.writer.lane(this.next);
    this.next = (this.next + 1) % this.lanes;
    return lane;
  }

  private alone(row: R, claim: ReturnType<typeof currentWriteClaim>): Promise<void> {
    return this.writer.write((em) => this.apply(em, [row]), { strict: true, claims: new WriteClaims().add(claim), probe: this.probeOf([row]) });
  }
}

const shared = new WeakMap<GroupCommitWriter, Map<unknown, unknown>>();

/** The one BulkWrite of `apply` on a writer (one writer per service), so every actor's rows of that kind gather together. */
export function bulkWriteOf<R>(writer: GroupCommitWriter, apply: BulkApply<R>, options: BulkWriteOptions<R> = {}): BulkWrite<R> {
  let kinds = shared.get(writer);
  if (!kinds) {
    kinds = new Map();
    shared.set(writer, kinds);
  }
  let bulk = kinds.get(apply) as BulkWrite<R> | undefined;
  if (!bulk) {
    bulk = new BulkWrite(writer, apply, options);
    kinds.set(apply, bulk);
  }
  return bulk;
}

import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import { currentWriteClaim, WriteClaims } from '../../persistence/write-claims.ts';
import type { DeliveryState } from './machine.ts';

/** A delivery's whole new state as the UPDATE joins it by id. */
interface StateRecord {
  id: string;
  status: string;
  attempts: DeliveryState['attempts'];
  attempt_count: number;
  next_attempt_at: string | null;
  failure_reason: string | null;
  updated_at: string;
}

/**
 * How long a batch gathers outcomes before its unit joins the writer's queue. Nobody waits on these writes
 * (the actor goes on with its next delivery at once; a failed write only makes it reload), so gathering
 * costs no delivery any time, and under load it makes one statement and one transaction of a few hundred
 * outcomes instead of one of each per group commit.
 */
const GATHER_MS = 100;

interface Batch {
  /** By delivery id: each record is the delivery's whole new state, so a later one replaces an earlier one. */
  rows: Map<string, StateRecord>;
  committed: Promise<void>;
  /** The shard leases of the endpoints whose outcomes joined (cluster mode). */
  claims: WriteClaims;
}

/**
 * Writes the outcomes of many endpoints' attempts as one UPDATE per group commit, not one per delivery: the
 * record of a delivery is its new state whole (status, every attempt, next attempt time), so a batch is a
 * set of rows joined by id. A batch gathers for GATHER_MS and then until its unit runs inside the writer's
 * transaction; records made after that go to the next one.
 *
 * Most deliveries are delivered at their first attempt: their whole state is then known from that attempt
 * alone (delivered, one attempt, no next attempt, no failure), so they are sent as a short tuple and the
 * statement builds the same row (the same jsonb) from it; every other state is sent whole.
 *
 * Both statements find each row by its primary key. Their `status = 'pending'` is compared in the "C"
 * collation (the same test: equality of text is bytewise in any deterministic collation) so that it does
 * not match the predicate of the partial index webhook_deliveries_pending_idx: without statistics (PGlite
 * never analyzes) the planner takes the pending rows for few and would otherwise read every pending row
 * of every endpoint through that index and hash-join them to the batch, tens of times slower than one
 * primary-key lookup per recorded delivery.
 */
export class DeliveryRecorder {
  private open: Batch | undefined;

  constructor(private readonly writer: GroupCommitWriter) {}

  /** Resolves once this outcome is committed; a delivery that is no longer pending is left as it is. */
  record(id: string, next: DeliveryState, at: Date): Promise<void> {
    let batch = this.open;
    if (!batch) {
      const rows = new Map<string, StateRecord>();
      const created: Batch = { rows, committed: Promise.resolve(), claims: new WriteClaims() };
      created.committed = this.writer.writeAfter(
        GATHER_MS,
        async (em) => {
          if (this.open === created) this.open = undefined;
          // [id, at, responseStatus, durationMs, updated_at] of each delivery delivered at its first attempt.
          const first: Array<[string, string, number, number, string]> = [];
          const whole: StateRecord[] = [];
          for (const row of rows.values()) {
            const attempt = row.attempts[0];
            if (
              row.status === 'delivered' &&
              row.attempts.length === 1 &&
              attempt!.attemptNumber === 1 &&
              attempt!.error === null &&
              attempt!.responseStatus !== null &&
              row.next_attempt_at === null &&
              row.failure_reason === null
            ) {
              first.push([row.id, attempt!.at, attempt!.responseStatus, attempt!.durationMs, row.updated_at]);
            } else {
              whole.push(row);
            }
          }
          if (first.length > 0) {
            await em.execute(
              `update webhook_deliveries d set status = 'delivered',
               attempts = jsonb_build_array(jsonb_build_object('attemptNumber', 1, 'at', v ->> 1, 'responseStatus', (v ->> 2)::integer, 'error', null, 'durationMs', (v ->> 3)::integer)),
               attempt_count = 1, next_attempt_at = null, failure_reason = null, updated_at = (v ->> 4)::timestamptz
             from jsonb_array_elements(?::jsonb) as v
             where d.id = v ->> 0 and d.status = 'pending' collate "C"`,
              [JSON.stringify(first)],
              'run',
            );
          }
          if (whole.length > 0) {
            await em.execute(
              `update webhook_deliveries d set status = v.status, attempts = v.attempts, attempt_count = v.attempt_count,
               next_attempt_at = v.next_attempt_at, failure_reason = v.failure_reason, updated_at = v.updated_at
             from jsonb_to_recordset(?::jsonb) as v(id text, status text, attempts jsonb, attempt_count integer, next_attempt_at timestamptz, failure_reason text, updated_at timestamptz)
             where d.id = v.id and d.status = 'pending' collate "C"`,
              [JSON.stringify(whole)],
              'run',
            );
          }
        },
        { claims: created.claims },
      );
      this.open = created;
      batch = created;
    }
    batch.claims.add(currentWriteClaim());
    batch.rows.set(id, {
      id,
      status: next.status,
      attempts: next.attempts,
      attempt_count: next.attempts.length,
      next_attempt_at: next.nextAttemptAt === undefined ? null : new Date(next.nextAttemptAt).toISOString(),
      failure_reason: next.failureReason ?? null,
      updated_at: at.toISOString(),
    });
    return batch.committed;
  }
}

const recorders = new WeakMap<GroupCommitWriter, DeliveryRecorder>();

/** The recorder of a writer (one per service). */
export function recorderFor(writer: GroupCommitWriter): DeliveryRecorder {
  let recorder = recorders.get(writer);
  if (!recorder) {
    recorder = new DeliveryRecorder(writer);
    recorders.set(writer, recorder);
  }
  return recorder;
}

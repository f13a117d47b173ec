import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import { currentWriteClaim, WriteClaims } from '../../persistence/write-claims.ts';
import { writeDeliveryStates, type DeliveryStateRecord } from '../../persistence/stores/webhooks/deliveries.ts';
import type { DeliveryState } from './machine.ts';

/**
 * How long a batch gathers outcomes before its unit joins the writer's queue. Nobody waits on these writes
 * (the actor goes on with its next delivery at once; a failed write only makes it reload), so gathering
 * costs no delivery any time, and under load it makes one statement and one transaction of a few hundred
 * outcomes instead of one of each per group commit.
 */
const GATHER_MS = 100;

interface Batch {
  /** By delivery id: each record is the delivery's whole new state, so a later one replaces an earlier one. */
  rows: Map<string, DeliveryStateRecord>;
  committed: Promise<void>;
  /** The shard leases of the endpoints whose outcomes joined (cluster mode). */
  claims: WriteClaims;
}

/**
 * Writes the outcomes of many endpoints' attempts as one UPDATE per group commit, not one per delivery: the
 * record of a delivery is its new state whole (status, every attempt, next attempt time), so a batch is a
 * set of rows joined by id (writeDeliveryStates). A batch gathers for GATHER_MS and then until its unit runs
 * inside the writer's transaction; records made after that go to the next one.
 */
export class DeliveryRecorder {
  private open: Batch | undefined;

  constructor(private readonly writer: GroupCommitWriter) {}

  /** Resolves once this outcome is committed; a delivery that is no longer pending is left as it is. */
  record(id: string, next: DeliveryState, at: Date): Promise<void> {
    let batch = this.open;
    if (!batch) {
      const rows = new Map<string, DeliveryStateRecord>();
      const created: Batch = { rows, committed: Promise.resolve(), claims: new WriteClaims() };
      created.committed = this.writer.writeAfter(
        GATHER_MS,
        async (em) => {
          if (this.open === created) this.open = undefined;
          await writeDeliveryStates(em, rows.values());
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

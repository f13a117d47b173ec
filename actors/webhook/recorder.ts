import type { SnapshotWriter } from '../../persistence/snapshot-writer.ts';
import type { DeliveryState } from './state.ts';

interface Batch {
  /** By delivery id: each record is the delivery's whole new state, so a later one replaces an earlier one. */
  rows: Map<string, Record<string, unknown>>;
  committed: Promise<void>;
}

/**
 * Writes the outcomes of many endpoints' attempts as one UPDATE per group commit, not one per delivery: the
 * record of a delivery is its new state whole (status, every attempt, next attempt time), so a batch is a
 * set of rows joined by id. A batch gathers until its unit runs inside the writer's transaction; records
 * made after that go to the next one.
 */
export class DeliveryRecorder {
  private open: Batch | undefined;

  constructor(private readonly writer: SnapshotWriter) {}

  /** Resolves once this outcome is committed; a delivery that is no longer pending is left as it is. */
  record(id: string, next: DeliveryState, at: Date): Promise<void> {
    let batch = this.open;
    if (!batch) {
      const rows = new Map<string, Record<string, unknown>>();
      const created: Batch = { rows, committed: Promise.resolve() };
      created.committed = this.writer.write(async (em) => {
        if (this.open === created) this.open = undefined;
        await em.execute(
          `update webhook_deliveries d set status = v.status, attempts = v.attempts, attempt_count = v.attempt_count,
             next_attempt_at = v.next_attempt_at, failure_reason = v.failure_reason, updated_at = v.updated_at
           from jsonb_to_recordset(?::jsonb) as v(id text, status text, attempts jsonb, attempt_count integer, next_attempt_at timestamptz, failure_reason text, updated_at timestamptz)
           where d.id = v.id and d.status = 'pending' returning d.id`,
          [JSON.stringify([...rows.values()])],
        );
      });
      this.open = created;
      batch = created;
    }
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

const recorders = new WeakMap<SnapshotWriter, DeliveryRecorder>();

/** The recorder of a writer (one per service). */
export function recorderFor(writer: SnapshotWriter): DeliveryRecorder {
  let recorder = recorders.get(writer);
  if (!recorder) {
    recorder = new DeliveryRecorder(writer);
    recorders.set(writer, recorder);
  }
  return recorder;
}

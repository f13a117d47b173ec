import type { JobContext } from '../../runtime/tracing.ts';
import { bulkWriteOf, type BulkWrite } from '../../persistence/bulk-write.ts';
import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import type { Transaction } from '../../persistence/stores/transaction.ts';
import { generationWritten, writeCreations, type NewCreation } from '../../persistence/stores/workspace/creations.ts';

/**
 * What creating one generation writes (persistence/stores/workspace/creations.ts): the row (queued, or
 * already reserved when its workspace had a free slot: reservedCreationsOf), its reservation, what it counts
 * against its API key, and its Idempotency-Key if it has one.
 */
export interface Creation extends NewCreation {
  /** The creating request's trace context and id (runtime/tracing.ts), kept with the job; null with tracing off. */
  traceContext?: JobContext | null;
}

const CREATION_LANES = 2;

/**
 * Whether creations whose transaction lost its connection were committed: their rows are written together
 * or not at all, so the first generation's row tells.
 */
async function creationProbe(em: Transaction, creations: Creation[]): Promise<boolean> {
  const first = creations[0];
  if (!first) return false;
  return generationWritten(em, first.generation.id);
}

/**
 * The creations of jobs reserved in their creation's transaction that may hold a slot freed by a settlement not
 * yet committed: in the writer's own lane, each queued behind its workspace's last settlement
 * (BulkWrite.addAfter), so that no crash can leave the new job reserved and the old one still running. The
 * others go with the queued ones (creationsOf).
 */
const writeReservedCreations = (em: Transaction, creations: Creation[]) => writeCreations(em, creations);

export function reservedCreationsOf(writer: GroupCommitWriter): BulkWrite<Creation> {
  return bulkWriteOf<Creation>(writer, writeReservedCreations, { probe: creationProbe });
}

/** The creations of a writer (one per service): every create of a group commit shares its statements. */
export function creationsOf(writer: GroupCommitWriter): BulkWrite<Creation> {
  // Two lanes: creations only insert new rows and move balances by deltas, so a batch may commit while
  // the previous one still is.
  return bulkWriteOf<Creation>(writer, writeCreations, { lanes: CREATION_LANES, probe: creationProbe });
}

import type { Transaction } from '../../persistence/stores/transaction.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { endedAmong, writeProgressRows } from '../../persistence/stores/generations/progress.ts';
import type { GenerationStatus } from '../../domain/generation-status.ts';
import { bulkWriteOf, type Added } from '../../persistence/bulk-write.ts';
import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import { writeStartedDeliveries } from '../webhook/started-event.ts';

/**
 * A non-terminal transition of one generation: its new row, applied only if the stored status is still
 * `from` (a job handed to its provider again after a restart keeps its status: `from` is then its own).
 */
export interface Progress {
  from: GenerationStatus;
  row: GenerationRow;
  /** The generation's trace when it moved (W3C traceparent), for the deliveries of generation.started. */
  traceParent?: string | null;
  /** Filled in by the write: the endpoints that got a generation.started delivery, to wake after the commit. */
  endpointIds?: string[];
}

/**
 * The non-terminal transitions (reserved, submitted, running) of one group commit as one UPDATE. A job's
 * actor does not wait for submitted and running to commit (generation/actor.ts), so both may be in one
 * batch: a job's rows are merged first (its first `from`, its last row). A row whose stored status is no
 * longer `from` was changed under its actor: the statement then throws, and BulkWrite writes every row again
 * alone, so only that one fails. A job already settled (a terminal status) is left as it is: its settlement
 * wrote its whole timeline.
 */
async function writeProgress(em: Transaction, all: Progress[]): Promise<void> {
  const merged = new Map<string, { from: GenerationStatus; last: Progress }>();
  for (const p of all) {
    const seen = merged.get(p.row.id);
    merged.set(p.row.id, { from: seen?.from ?? p.from, last: p });
  }
  const rows = [...merged.values()];
  const changed = await writeProgressRows(
    em,
    rows.map(({ from, last }) => ({ from, row: last.row })),
  );
  if (changed.length !== rows.length) {
    const found = new Set(changed.map((c) => c.id));
    const missed = rows.filter((r) => !found.has(r.last.row.id)).map((r) => r.last.row.id);
    const done = new Set(await endedAmong(em, missed));
    const moved = missed.filter((id) => !done.has(id));
    if (moved.length > 0)
      throw new Error(`generation${moved.length === 1 ? '' : 's'} ${moved.join(', ')} changed under ${moved.length === 1 ? 'its actor' : 'their actors'}`);
  }
  // A move to running makes the opt-in generation.started deliveries, in this same transaction, when an
  // endpoint of its workspace asked for them (the UPDATE said so: no statement more when none did).
  const wanted = new Set(changed.filter((c) => c.startedWanted).map((c) => c.id));
  const started = rows.filter((r) => wanted.has(r.last.row.id)).map((r) => r.last);
  if (started.length === 0) return;
  const endpoints = await writeStartedDeliveries(
    em,
    started.map((r) => ({ generation: r.row, at: r.row.updatedAt.getTime(), traceParent: r.traceParent ?? null })),
  );
  started.forEach((r, i) => {
    r.endpointIds = endpoints[i];
  });
}

/** By writer, the queue position of each job's last progress write not yet committed (pendingProgressOf). */
const pendingByWriter = new WeakMap<GroupCommitWriter, Map<string, number>>();

/**
 * Persists a non-terminal transition: its commit, and the queue position of its write. Until it commits, a
 * settlement of the same job is queued behind it (pendingProgressOf, writeSettlement's `after`).
 */
export function writeProgressOf(writer: GroupCommitWriter, progress: Progress): Added {
  // One lane, the writer's own: a job's reserved then commits with or after the settlement that freed its
  // slot, never before it, so a crash between them cannot leave more jobs running than the plan allows.
  const added = bulkWriteOf(writer, writeProgress).addAfter(progress);
  let pending = pendingByWriter.get(writer);
  if (!pending) pendingByWriter.set(writer, (pending = new Map()));
  const id = progress.row.id;
  pending.set(id, added.position);
  const done = () => {
    if (pending.get(id) === added.position) pending.delete(id);
  };
  added.committed.then(done, done);
  return added;
}

/** The queue position of the job's last progress write not yet committed, if it has one: its settlement goes behind it. */
export function pendingProgressOf(writer: GroupCommitWriter, generationId: string): number | undefined {
  return pendingByWriter.get(writer)?.get(generationId);
}

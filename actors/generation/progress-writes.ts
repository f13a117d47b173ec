import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { GenerationRow } from '../../persistence/entities/generation.ts';
import type { GenerationStatus } from '../../domain/generation-status.ts';
import { bulkWriteOf, type Added } from '../../persistence/bulk-write.ts';
import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import { boundQuery } from '../../persistence/bound-query.ts';
import { noteTransactionId, TXID_COLUMN } from '../../persistence/transaction-id.ts';
import { STARTED_WANTED, writeStartedDeliveries } from '../webhook/started-event.ts';

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
async function writeProgress(em: SqlEntityManager, all: Progress[]): Promise<void> {
  const merged = new Map<string, { from: GenerationStatus; last: Progress }>();
  for (const p of all) {
    const seen = merged.get(p.row.id);
    merged.set(p.row.id, { from: seen?.from ?? p.from, last: p });
  }
  const rows = [...merged.values()];
  const changed = await boundQuery<{ id: string; txid: string; started_wanted: boolean }>(
    em,
    `update generations g set status = v.status, timeline = v.timeline, provider_job_id = v.provider_job_id, attempts = v.attempts, started_at = v.started_at, updated_at = v.updated_at,
       provider = v.provider, deployment_id = v.deployment_id
     from jsonb_to_recordset(?::jsonb) as v(id text, from_status text, status text, timeline jsonb, provider_job_id text, attempts integer, started_at timestamptz,
       updated_at timestamptz, provider text, deployment_id text)
     where g.id = v.id and g.status = v.from_status
     returning g.id, ${TXID_COLUMN}, v.status = 'running' and v.from_status <> 'running' and ${STARTED_WANTED} as started_wanted`,
    [
      JSON.stringify(
        rows.map(({ from, last: { row } }) => ({
          id: row.id,
          from_status: from,
          status: row.status,
          timeline: row.timeline,
          provider_job_id: row.providerJobId,
          attempts: row.attempts,
          started_at: row.startedAt,
          updated_at: row.updatedAt,
          provider: row.provider,
          deployment_id: row.deploymentId,
        })),
      ),
    ],
  );
  noteTransactionId(em, changed[0]?.txid);
  if (changed.length !== rows.length) {
    const found = new Set(changed.map((c) => c.id));
    const missed = rows.filter((r) => !found.has(r.last.row.id)).map((r) => r.last.row.id);
    const settled = await boundQuery<{ id: string }>(
      em,
      `select id from generations where id in (select value from jsonb_array_elements_text(?::jsonb)) and status not in ('queued', 'reserved', 'submitted', 'running')`,
      [JSON.stringify(missed)],
    );
    const done = new Set(settled.map((r) => r.id));
    const moved = missed.filter((id) => !done.has(id));
    if (moved.length > 0)
      throw new Error(`generation${moved.length === 1 ? '' : 's'} ${moved.join(', ')} changed under ${moved.length === 1 ? 'its actor' : 'their actors'}`);
  }
  // A move to running makes the opt-in generation.started deliveries, in this same transaction, when an
  // endpoint of its workspace asked for them (the UPDATE said so: no statement more when none did).
  const wanted = new Set(changed.filter((c) => c.started_wanted).map((c) => c.id));
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

/**
 * Persists a non-terminal transition: its commit, and the queue position of its write (a settlement of the
 * same job is queued behind it: writeSettlement's `after`).
 */
export function writeProgressOf(writer: GroupCommitWriter, progress: Progress): Added {
  // One lane, the writer's own: a job's reserved then commits with or after the settlement that freed its
  // slot, never before it, so a crash between them cannot leave more jobs running than the plan allows.
  return bulkWriteOf(writer, writeProgress).addAfter(progress);
}

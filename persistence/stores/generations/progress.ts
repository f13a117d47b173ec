/** The statements of a generation's life in flight: its row read by its actor, its non-terminal transitions written. */
import { boundQuery } from '../../bound-query.ts';
import type { Database } from '../../database.ts';
import { generationRowOf, type GenerationRow } from '../../entities/generation.ts';
import { noteTransactionId, TXID_COLUMN } from '../../transaction-id.ts';
import type { Transaction } from '../transaction.ts';
import { STARTED_WANTED } from '../webhooks/endpoints.ts';

/** A generation's row, or undefined. */
export async function findGeneration(db: Database, id: string): Promise<GenerationRow | undefined> {
  const [raw] = await boundQuery<Record<string, unknown>>(db.em(), 'select * from generations where id = ?', [id]);
  return raw ? generationRowOf(raw) : undefined;
}

/** A generation's move to a non-terminal status, applied only while its stored status is `from`. */
export interface ProgressRow {
  from: GenerationRow['status'];
  row: GenerationRow;
}

/**
 * The moves of many generations as one UPDATE (each job once); notes the transaction's id for the writer.
 * Returns the jobs moved, each with whether it went to running in a workspace with an endpoint that asked
 * for generation.started (STARTED_WANTED).
 */
export async function writeProgressRows(em: Transaction, rows: ProgressRow[]): Promise<Array<{ id: string; startedWanted: boolean }>> {
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
        rows.map(({ from, row }) => ({
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
  return changed.map((c) => ({ id: c.id, startedWanted: c.started_wanted }));
}

/** Of these generations, those already ended (a terminal status). */
export async function endedAmong(em: Transaction, ids: string[]): Promise<string[]> {
  const settled = await boundQuery<{ id: string }>(
    em,
    `select id from generations where id in (select value from jsonb_array_elements_text(?::jsonb)) and status not in ('queued', 'reserved', 'submitted', 'running')`,
    [JSON.stringify(ids)],
  );
  return settled.map((r) => r.id);
}

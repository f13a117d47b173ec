/**
 * The statement of generations' ends (the workspace actor's settlements, gathered by group commit): each
 * generation's terminal state, written only while it is still unfinished. The rest of a settlement's
 * transaction is the money's (money.ts), the usage's and the events' statements.
 */
import { boundQuery } from '../../bound-query.ts';
import type { StoredCharge } from '../generations/charge.ts';
import type { GenerationRow } from '../generations/rows.ts';
import type { Transaction } from '../transaction.ts';

/** A generation's terminal state as its settlement writes it. */
export interface GenerationEnd {
  id: string;
  status: 'succeeded' | 'failed' | 'cancelled' | 'expired';
  completedAt: string;
  updatedAt: Date;
  textOutput: string | null;
  outputAssetIds: string[];
  errorCode: string | null;
  errorMessage: string | null;
  timeline: GenerationRow['timeline'];
  /** What it was charged (a token-priced job: what it used). */
  credits: number;
  /** The tokens its provider reported; null keeps those stored. */
  usage: GenerationRow['usage'];
  /** A token-priced capture's exact cost and token carry (GET /v1/generations/:id, price). */
  charge: StoredCharge | null;
}

/**
 * The ends of many generations as one UPDATE, each only if it is still unfinished (queued, reserved,
 * submitted or running). Asked for at once (no await before the statement), so it goes with the other
 * statements of its transaction. Answers the generations it changed.
 */
export function writeGenerationEnds(em: Transaction, ends: GenerationEnd[]): Promise<Array<{ id: string }>> {
  return boundQuery<{ id: string }>(
    em,
    `update generations g set status = v.status, completed_at = v.completed_at, updated_at = v.updated_at, text_output = v.text_output,
       output_asset_ids = v.output_asset_ids, error_code = v.error_code, error_message = v.error_message, timeline = v.timeline,
       credits = v.credits, usage = coalesce(v.usage, g.usage), charge = v.charge
     from jsonb_to_recordset(?::jsonb) as v(id text, status text, completed_at timestamptz, updated_at timestamptz, text_output text,
       output_asset_ids jsonb, error_code text, error_message text, timeline jsonb, credits integer, usage jsonb, charge jsonb)
     where g.id = v.id and g.status in ('queued', 'reserved', 'submitted', 'running')
     returning g.id`,
    [
      JSON.stringify(
        ends.map((e) => ({
          id: e.id,
          status: e.status,
          completed_at: e.completedAt,
          updated_at: e.updatedAt,
          text_output: e.textOutput,
          output_asset_ids: e.outputAssetIds,
          error_code: e.errorCode,
          error_message: e.errorMessage,
          timeline: e.timeline,
          credits: e.credits,
          usage: e.usage,
          charge: e.charge,
        })),
      ),
    ],
  );
}

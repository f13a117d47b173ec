import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { bulkWriteOf } from '../../persistence/bulk-write.ts';
import type { SnapshotWriter } from '../../persistence/snapshot-writer.ts';
import { writeEventDeliveries, type SettledEvent } from '../webhook/enqueue.ts';
import { writeGenerationEvents } from '../webhook/events.ts';
import { writeMoneyChanges, type MoneyChange } from './money-writes.ts';
import type { KeySpendDelta } from './key-limits.ts';
import { keySpendWrite } from './key-spend-writes.ts';
import type { GenerationSettlement } from './protocol.ts';
import { boundQuery } from '../../persistence/bound-query.ts';
import { addUsage, statusFigure, type UsageDelta } from '../../persistence/usage-rollups.ts';

/** What a generation's end writes in one transaction: its terminal state, its capture or release, its outputs and its event's deliveries. */
export interface Settlement {
  generationId: string;
  settlement: GenerationSettlement;
  updatedAt: Date;
  money: MoneyChange;
  /** The release's give-back to its API key's spend rows, if any; rides in the money's statement. */
  keySpendDeltas?: KeySpendDelta[];
  /** Filled in by the write: the endpoints that got a delivery of the event, to wake after the commit. */
  endpointIds: string[];
}

/**
 * The settlements of one group commit in a few statements whatever their number: one UPDATE of the
 * generations (each only if still unfinished), one money write for all their workspaces, one upsert of
 * their usage rollups, each one's own
 * extra writes (output assets), and the deliveries of all their events. A generation that is no longer
 * unfinished makes the UPDATE throw; BulkWrite then writes each settlement alone, so only that one fails.
 */
async function writeSettlements(em: SqlEntityManager, rows: Settlement[]): Promise<void> {
  const changed = await boundQuery<{ id: string; workspace_id: string; api_key_id: string | null; day: string; credits: number }>(em,
    `update generations g set status = v.status, completed_at = v.completed_at, updated_at = v.updated_at, text_output = v.text_output,
       output_asset_ids = v.output_asset_ids, error_code = v.error_code, error_message = v.error_message, timeline = v.timeline
     from jsonb_to_recordset(?::jsonb) as v(id text, status text, completed_at timestamptz, updated_at timestamptz, text_output text,
       output_asset_ids jsonb, error_code text, error_message text, timeline jsonb)
     where g.id = v.id and g.status in ('queued', 'reserved', 'submitted', 'running')
     returning g.id, g.workspace_id, g.api_key_id, to_char(g.created_at at time zone 'UTC', 'YYYY-MM-DD') as day, g.credits`,
    [JSON.stringify(rows.map(({ generationId, settlement: s, updatedAt }) => ({
      id: generationId, status: s.status, completed_at: s.completedAt, updated_at: updatedAt, text_output: s.textOutput ?? null,
      output_asset_ids: s.outputAssetIds, error_code: s.errorCode ?? null, error_message: s.errorMessage ?? null, timeline: s.timeline,
    })))],
  );
  if (changed.length !== rows.length) {
    const found = new Set(changed.map((c) => c.id));
    throw new Error(`generation ${rows.filter((r) => !found.has(r.generationId)).map((r) => r.generationId).join(', ')} is not active any more`);
  }
  // The keys' give-backs summed into one write (one statement may not touch a row twice).
  const keySpend = keySpendWrite(rows.flatMap((r) => r.keySpendDeltas ?? []));
  await writeMoneyChanges(em, rows.map((r) => r.money), keySpend ? [keySpend] : []);
  // Before the outputs: their bytes then go to rollup rows this transaction already holds.
  await addUsage(em, usageOf(rows, changed));
  for (const row of rows) for (const also of row.settlement.alsoWrite ?? []) await also(em);
  const events = rows.flatMap((r) => (r.settlement.event ? [r.settlement.event] : []));
  await writeGenerationEvents(em, events);
  const endpoints = await writeEventDeliveries(em, events);
  const byGeneration = new Map(events.map((e, i) => [e.generation.id, endpoints[i]!]));
  for (const row of rows) row.endpointIds = byGeneration.get(row.generationId) ?? [];
}

/**
 * What the settlements change in the usage rollups: each generation leaves `unfinished` for its terminal
 * status, and a capture adds the generation's credits and what the capture took from the balance and the wallet.
 */
function usageOf(rows: Settlement[], changed: Array<{ id: string; workspace_id: string; api_key_id: string | null; day: string; credits: number }>): UsageDelta[] {
  const byId = new Map(changed.map((g) => [g.id, g]));
  return rows.map(({ generationId, settlement, money }) => {
    const g = byId.get(generationId)!;
    const delta: UsageDelta = { workspaceId: g.workspace_id, apiKeyId: g.api_key_id, day: g.day, unfinished: -1 };
    delta[statusFigure(settlement.status)] = 1;
    for (const e of money.entries) {
      if (e.kind !== 'capture' || e.generationId !== generationId) continue;
      delta.credits = (delta.credits ?? 0) + Number(g.credits);
      delta.creditsFromBalance = (delta.creditsFromBalance ?? 0) - e.reservedCredits;
      delta.costCents = (delta.costCents ?? 0) - e.reservedWalletCents;
    }
    return delta;
  });
}

/** Writes a settlement with the others of its group commit; resolves once committed. */
export function writeSettlement(writer: SnapshotWriter, settlement: Settlement): Promise<void> {
  return bulkWriteOf(writer, writeSettlements).add(settlement);
}

export type { SettledEvent };

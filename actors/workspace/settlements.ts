import { bulkWriteOf, type Added } from '../../persistence/bulk-write.ts';
import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import type { Transaction } from '../../persistence/stores/transaction.ts';
import { keySpendWrite } from '../../persistence/stores/workspace/keys.ts';
import { writeMoneyChanges, type MoneyChange } from '../../persistence/stores/workspace/money.ts';
import { writeGenerationEnds } from '../../persistence/stores/workspace/settlements.ts';
import { writeEventDeliveries, type SettledEvent } from '../webhook/enqueue.ts';
import { writeGenerationEvents } from '../webhook/events.ts';
import type { KeySpendDelta } from '../../domain/key-limits.ts';
import type { GenerationSettlement } from './protocol.ts';
import { createAsset } from '../../persistence/assets/store.ts';
import { addUsage, statusFigure, usageDay, type UsageDelta } from '../../persistence/usage-rollups.ts';
import { addSeries, type SeriesDelta } from '../../persistence/usage-series.ts';

/** What a generation's end writes in one transaction: its terminal state, its capture or release, its outputs and its event's deliveries. */
export interface Settlement {
  generationId: string;
  settlement: GenerationSettlement;
  updatedAt: Date;
  money: MoneyChange;
  /** The release's give-back to its API key's spend rows, if any; rides in the money's statement. */
  keySpendDeltas?: KeySpendDelta[];
  /** A token-priced capture's exact cost and the token carry before and after it (billionths of a credit, as decimal strings). */
  charge?: { exactNano: string; carryBeforeNano: string; carryAfterNano: string; capped: boolean };
  /** Filled in by the write: the endpoints that got a delivery of the event, to wake after the commit. */
  endpointIds: string[];
}

/**
 * The settlements of one group commit in a few statements whatever their number: one UPDATE of the
 * generations (each only if still unfinished), one money write for all their workspaces, one upsert of
 * their usage rollups, each one's own extra writes (output assets), and the events and deliveries of all
 * their events. The statements are asked for together, so on PostgreSQL they cost one round trip
 * (direct-transaction.ts); output assets, when there are some, go after the rollups and before the events.
 * A generation that is no longer unfinished makes the write throw; BulkWrite then writes each settlement
 * alone, so only that one fails.
 */
async function writeSettlements(em: Transaction, rows: Settlement[]): Promise<void> {
  const updated = writeGenerationEnds(
    em,
    rows.map(({ generationId, settlement: s, updatedAt, charge }) => ({
      id: generationId,
      status: s.status,
      completedAt: s.completedAt,
      updatedAt,
      textOutput: s.textOutput ?? null,
      outputAssetIds: s.outputAssetIds,
      errorCode: s.errorCode ?? null,
      errorMessage: s.errorMessage ?? null,
      timeline: s.timeline,
      credits: s.generation.credits,
      usage: s.generation.usage ?? null,
      charge: charge ?? null,
    })),
  );
  // The keys' give-backs summed into one write (one statement may not touch a row twice).
  const keySpend = keySpendWrite(rows.flatMap((r) => r.keySpendDeltas ?? []));
  const money = writeMoneyChanges(
    em,
    rows.map((r) => r.money),
    keySpend ? [keySpend] : [],
  );
  // Before the outputs: their bytes then go to rollup rows this transaction already holds.
  // The series' upsert is asked for with the rest (no round trip of its own): it reads nothing the rollups' writes.
  const usage = Promise.all([addUsage(em, rows.map(usageOf)), addSeries(em, rows.map(seriesOf))]);
  const outputs = rows.flatMap((r) => r.settlement.outputAssets ?? []);
  if (outputs.length > 0) {
    await Promise.all([updated, money, usage]);
    for (const asset of outputs) await createAsset(em, asset);
  }
  const events = rows.flatMap((r) => (r.settlement.event ? [r.settlement.event] : []));
  const [changed, , , , endpoints] = await Promise.all([updated, money, usage, writeGenerationEvents(em, events), writeEventDeliveries(em, events)]);
  if (changed.length !== rows.length) {
    const found = new Set(changed.map((c) => c.id));
    throw new Error(
      `generation ${rows
        .filter((r) => !found.has(r.generationId))
        .map((r) => r.generationId)
        .join(', ')} is not active any more`,
    );
  }
  const byGeneration = new Map(events.map((e, i) => [e.generation.id, endpoints[i]!]));
  for (const row of rows) row.endpointIds = byGeneration.get(row.generationId) ?? [];
}

/**
 * What a settlement changes in the usage rollups: its generation leaves `unfinished` for its terminal
 * status, and a capture adds the generation's credits and what the capture took from the balance and the
 * wallet. The row's key, day and credits (fixed at creation) are the settlement's own copy of it.
 */
function usageOf({ generationId, settlement, money }: Settlement): UsageDelta {
  const g = settlement.generation;
  const delta: UsageDelta = { workspaceId: money.workspaceId, apiKeyId: g.apiKeyId, day: usageDay(new Date(g.createdAt)), unfinished: -1 };
  delta[statusFigure(settlement.status)] = 1;
  for (const e of money.entries) {
    if (e.kind !== 'capture' || e.generationId !== generationId) continue;
    delta.credits = (delta.credits ?? 0) + Number(g.credits);
    delta.creditsFromBalance = (delta.creditsFromBalance ?? 0) - e.reservedCredits;
    delta.costCents = (delta.costCents ?? 0) - e.reservedWalletCents;
  }
  return delta;
}

/** The same change for the usage series (persistence/usage-series.ts), with the tokens the provider reported. */
function seriesOf(row: Settlement): SeriesDelta {
  const g = row.settlement.generation;
  const tokens = g.usage ?? { inputTokens: 0, outputTokens: 0 };
  const { day: _day, ...figures } = usageOf(row);
  return {
    ...figures,
    modelId: g.modelId,
    mode: g.mode,
    project: g.project,
    createdAt: g.createdAt,
    tokensIn: Number(tokens.inputTokens) || 0,
    tokensOut: Number(tokens.outputTokens) || 0,
  };
}

/**
 * Writes a settlement with the others of its group commit; resolves once committed. `after`: the queue
 * position of its generation's last progress write (progress-writes.ts), which it must not overtake.
 */
export function writeSettlement(writer: GroupCommitWriter, settlement: Settlement, after?: number): Added {
  return bulkWriteOf(writer, writeSettlements).addAfter(settlement, after);
}

export type { SettledEvent };

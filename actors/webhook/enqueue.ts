import type { Transaction } from '../../persistence/stores/transaction.ts';
import { countSubscribed, holdSubscriptions } from '../../persistence/stores/webhooks/endpoints.ts';
import { insertEventDeliveries, type EventDeliveryRows } from '../../persistence/stores/webhooks/deliveries.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { newId } from '../../persistence/ids.ts';
import { EVENT_OF } from '../../domain/generation-status.ts';
import type { TerminalStatus } from '../../domain/generation-status.ts';

/** A workspace has at most this many webhook endpoints (deleted ones aside); creation takes the workspace lock to keep it so. */
export const MAX_ENDPOINTS_PER_WORKSPACE = 20;

/** The event body (docs/webhooks.md, What arrives) without its `id` (each endpoint's delivery has its own). */
export function eventBody(
  generation: GenerationRow,
  status: TerminalStatus,
  createdAt: Date,
): { event: string; data: Record<string, unknown>; createdAt: string } {
  const data: Record<string, unknown> = {
    generationId: generation.id,
    workspaceId: generation.workspaceId,
    mode: generation.mode,
    modelId: generation.modelId,
    status,
    outputAssetIds: generation.outputAssetIds ?? [],
    credits: generation.credits,
    startedAt: generation.startedAt?.toISOString() ?? null,
    completedAt: generation.completedAt?.toISOString() ?? null,
  };
  if (status === 'failed') {
    data.errorCode = generation.errorCode;
    data.errorMessage = generation.errorMessage;
  }
  return { event: EVENT_OF[status], data, createdAt: createdAt.toISOString() };
}

/** A generation's terminal event, to be delivered to its workspace's subscribed endpoints. */
export interface SettledEvent {
  generation: GenerationRow;
  status: TerminalStatus;
  at: number;
  /** The generation's trace (W3C traceparent) when the event was made; each attempt continues it. */
  traceParent?: string | null;
  /** Its stored event (events.ts), set when the event is written; its deliveries carry it. */
  eventId?: string;
}

/**
 * The deliveries of many terminal events, written inside the transaction that commits those terminal
 * states, in two statements whatever their number: a count of each workspace's active endpoints
 * subscribed to each event (which sizes the ids, and is the only statement when none is), then one
 * INSERT … SELECT over those endpoints. The endpoints are read in that transaction, so an event and its
 * deliveries commit (or not) together. Returns, per event (same order), the endpoints that got one.
 */
export async function writeEventDeliveries(em: Transaction, events: SettledEvent[]): Promise<string[][]> {
  const endpointsOf: string[][] = events.map(() => []);
  if (events.length === 0) return endpointsOf;
  const wanted = [
    ...new Map(
      events.map((e) => {
        const eventType = EVENT_OF[e.status];
        return [`${e.generation.workspaceId} ${eventType}`, { workspace_id: e.generation.workspaceId, event_type: eventType }];
      }),
    ).values(),
  ];
  // An endpoint being created now is either seen by both statements below or made after this commit. The
  // lock and the count are asked for together (in one round trip on PostgreSQL, direct-transaction.ts); the
  // server runs them in order, and the count reads with a snapshot taken once the lock is held.
  // Most workspaces have no endpoint: then the count is the last statement.
  const [, counted] = await Promise.all([
    holdSubscriptions(
      em,
      events.map((e) => e.generation.workspaceId),
    ),
    countSubscribed(em, wanted),
  ]);
  if (counted.length === 0) return endpointsOf;
  const counts = new Map(counted.map((c) => [`${c.workspace_id} ${c.event_type}`, Math.min(Number(c.n), MAX_ENDPOINTS_PER_WORKSPACE)]));
  const rows: EventDeliveryRows[] = [];
  for (const e of events) {
    const eventType = EVENT_OF[e.status];
    const count = counts.get(`${e.generation.workspaceId} ${eventType}`) ?? 0;
    if (count === 0) continue;
    const createdAt = new Date(e.at);
    const { event, data, createdAt: created } = eventBody(e.generation, e.status, createdAt);
    rows.push({
      generation_id: e.generation.id,
      workspace_id: e.generation.workspaceId,
      event_type: event,
      created_at: createdAt,
      trace_parent: e.traceParent ?? null,
      event_id: e.eventId ?? null,
      rest: JSON.stringify({ event, data, createdAt: created }).slice(1),
      ids: Array.from({ length: count }, () => newId('dlv', e.at)),
    });
  }
  if (rows.length === 0) return endpointsOf;
  return insertDeliveries(em, events, rows);
}

/**
 * One INSERT … SELECT of the deliveries of many events (at most one per generation) over the active endpoints
 * subscribed to each. Returns, per event (same order as `events`), the endpoints that got one.
 */
export async function insertDeliveries(em: Transaction, events: Array<{ generation: { id: string } }>, rows: EventDeliveryRows[]): Promise<string[][]> {
  // An endpoint made since the count (beyond the ids made) waits for the next event: never a delivery without an id.
  const inserted = await insertEventDeliveries(em, rows);
  const endpointsOf: string[][] = events.map(() => []);
  const index = new Map(events.map((e, i) => [e.generation.id, i]));
  for (const row of inserted) endpointsOf[index.get(row.generation_id)!]!.push(row.endpoint_id);
  return endpointsOf;
}

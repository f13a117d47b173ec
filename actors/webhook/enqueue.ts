import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { GenerationRow } from '../../persistence/entities/generation.ts';
import { newId } from '../../persistence/ids.ts';
import { EVENT_OF } from '../generation/machine.ts';
import type { TerminalStatus } from '../../domain/generation-status.ts';
import { holdSubscriptions } from './subscription-lock.ts';

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
export async function writeEventDeliveries(em: SqlEntityManager, events: SettledEvent[]): Promise<string[][]> {
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
    em.execute<Array<{ workspace_id: string; event_type: string; n: number | string }>>(
      `select w.workspace_id, w.event_type, count(*) as n
     from jsonb_to_recordset(?::jsonb) as w(workspace_id text, event_type text)
     join webhook_endpoints e on e.workspace_id = w.workspace_id and e.status = 'active' and e.deleted_at is null and e.event_types @> jsonb_build_array(w.event_type)
     group by w.workspace_id, w.event_type`,
      [JSON.stringify(wanted)],
    ),
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

/** The deliveries to make for one event of one generation: one per subscribed endpoint counted. */
export interface EventDeliveryRows {
  generation_id: string;
  workspace_id: string;
  event_type: string;
  event_id: string | null;
  created_at: Date;
  trace_parent: string | null;
  /** The body after its id, so each delivery's body is `{"id":"dlv_…",` + this, exactly as it will be signed. */
  rest: string;
  /** In creation order, so each endpoint's deliveries sort by id in the order of their events. */
  ids: string[];
}

/**
 * One INSERT … SELECT of the deliveries of many events (at most one per generation) over the active endpoints
 * subscribed to each. Returns, per event (same order as `events`), the endpoints that got one.
 */
export async function insertDeliveries(em: SqlEntityManager, events: Array<{ generation: { id: string } }>, rows: EventDeliveryRows[]): Promise<string[][]> {
  // An endpoint made since the count (beyond the ids made) waits for the next event: never a delivery without an id.
  const inserted = await em.execute<Array<{ generation_id: string; endpoint_id: string }>>(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at, trace_parent)
     select m.delivery_id, m.endpoint_id, m.workspace_id, m.generation_id, m.event_type, m.event_id, '{"id":"' || m.delivery_id || '",' || m.rest,
       'pending', '[]'::jsonb, 0, m.created_at, m.created_at, m.created_at, m.trace_parent
     from (
       select e.id as endpoint_id, s.workspace_id, s.generation_id, s.event_type, s.event_id, s.rest, s.created_at, s.trace_parent,
         s.ids ->> ((row_number() over (partition by s.generation_id order by e.id))::int - 1) as delivery_id
       from jsonb_to_recordset(?::jsonb) as s(generation_id text, workspace_id text, event_type text, event_id text, rest text, created_at timestamptz, ids jsonb, trace_parent text)
       join webhook_endpoints e on e.workspace_id = s.workspace_id and e.status = 'active' and e.deleted_at is null and e.event_types @> jsonb_build_array(s.event_type)
     ) m
     where m.delivery_id is not null
     returning generation_id, endpoint_id`,
    [JSON.stringify(rows)],
  );
  const endpointsOf: string[][] = events.map(() => []);
  const index = new Map(events.map((e, i) => [e.generation.id, i]));
  for (const row of inserted) endpointsOf[index.get(row.generation_id)!]!.push(row.endpoint_id);
  return endpointsOf;
}

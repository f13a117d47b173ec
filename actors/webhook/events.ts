import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../persistence/ids.ts';
import { EVENT_OF } from '../generation/machine.ts';
import { eventBody, type SettledEvent } from './enqueue.ts';

/** Events are kept this long (GET /v1/events, replay); the retention job deletes older ones. */
export const EVENT_RETENTION_MS = 30 * 24 * 3_600_000;

/** An event as stored: the delivery body after its `"id":…,`, so each delivery's body is `{"id":"dlv_…",` + rest. */
export interface EmittedEvent {
  id: string;
  workspaceId: string;
  generationId: string | null;
  eventType: string;
  rest: string;
  createdAt: Date;
}

/** The body of a first delivery of an event (its id is the delivery's). */
export function bodyOf(deliveryId: string, rest: string): string {
  return `{"id":${JSON.stringify(deliveryId)},${rest}`;
}

/** The stored event of a generation's terminal state: the same bytes writeEventDeliveries puts after the id. */
export function generationEvent(e: SettledEvent): EmittedEvent {
  const createdAt = new Date(e.at);
  const { event, data, createdAt: created } = eventBody(e.generation, e.status, createdAt);
  return {
    id: newId('evt', e.at),
    workspaceId: e.generation.workspaceId,
    generationId: e.generation.id,
    eventType: EVENT_OF[e.status],
    rest: JSON.stringify({ event, data, createdAt: created }).slice(1),
    createdAt,
  };
}

/**
 * Writes events in one statement, inside the transaction that emits them (a settlement's, an endpoint's
 * disabling), so an event is kept exactly when it happened. Every event is kept, subscribed or not: an
 * endpoint made later can still be sent one (POST /v1/webhooks/:id/replay).
 */
export async function writeEvents(em: SqlEntityManager, events: EmittedEvent[]): Promise<void> {
  if (events.length === 0) return;
  await em.execute(
    `insert into webhook_events (id, workspace_id, generation_id, event_type, body_rest, created_at)
     select id, workspace_id, generation_id, event_type, body_rest, created_at
     from jsonb_to_recordset(?::jsonb) as v(id text, workspace_id text, generation_id text, event_type text, body_rest text, created_at timestamptz)`,
    [
      JSON.stringify(
        events.map((e) => ({
          id: e.id,
          workspace_id: e.workspaceId,
          generation_id: e.generationId,
          event_type: e.eventType,
          body_rest: e.rest,
          created_at: e.createdAt.toISOString(),
        })),
      ),
    ],
    'run',
  );
}

/** Keeps the terminal events of a group commit, and gives each SettledEvent its event id (its deliveries carry it). */
export async function writeGenerationEvents(em: SqlEntityManager, events: SettledEvent[]): Promise<void> {
  const emitted = events.map(generationEvent);
  for (const [i, e] of events.entries()) e.eventId = emitted[i]!.id;
  await writeEvents(em, emitted);
}

import type { Transaction } from '../../persistence/stores/transaction.ts';
import { insertEvents, type StoredEvent } from '../../persistence/stores/webhooks/events.ts';
import { newId } from '../../persistence/ids.ts';
import { EVENT_OF } from '../../domain/generation-status.ts';
import { eventBody, type SettledEvent } from './enqueue.ts';

/** Events are kept this long (GET /v1/events, replay); the retention job deletes older ones. */
export const EVENT_RETENTION_MS = 30 * 24 * 3_600_000;

/** An event as stored: the delivery body after its `"id":…,`, so each delivery's body is `{"id":"dlv_…",` + rest. */
export type EmittedEvent = StoredEvent;

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

/** Keeps the terminal events of a group commit, and gives each SettledEvent its event id (its deliveries carry it). */
export async function writeGenerationEvents(em: Transaction, events: SettledEvent[]): Promise<void> {
  const emitted = events.map(generationEvent);
  for (const [i, e] of events.entries()) e.eventId = emitted[i]!.id;
  await insertEvents(em, emitted);
}

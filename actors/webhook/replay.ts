import type { Unit } from '../../persistence/stores/unit.ts';
import { firstDeliveryOfEvent } from '../../persistence/stores/webhooks/deliveries.ts';
import type { StoredEvent } from '../../persistence/stores/webhooks/events.ts';
import { insertFirstDelivery, insertResends } from './resend.ts';

export { findEvent, type StoredEvent } from '../../persistence/stores/webhooks/events.ts';

/**
 * Sends one event to one endpoint: if the endpoint had a delivery of it (still in its history), that
 * delivery is sent again, so the body's id is the one the receiver saw then; otherwise a first delivery
 * is made, whose body's id is its own. Returns the new delivery's id.
 */
export async function replayEvent(tx: Unit, endpoint: { id: string; workspaceId: string }, event: StoredEvent, now: number): Promise<string> {
  const earlier = await firstDeliveryOfEvent(tx, endpoint.id, event.id);
  if (earlier) {
    const [id] = await insertResends(tx, endpoint.id, [earlier], now);
    return id!;
  }
  return insertFirstDelivery(tx, endpoint, event, now);
}

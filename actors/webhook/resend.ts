import type { Unit } from '../../persistence/stores/unit.ts';
import { insertFirstDelivery as insertFirst, insertResendCopies } from '../../persistence/stores/webhooks/deliveries.ts';
import { newId } from '../../persistence/ids.ts';
import { bodyOf } from './events.ts';

/**
 * Makes new pending deliveries that send `originals` (delivery ids of one endpoint) again, in that order:
 * each a copy of its original's body, byte for byte (so the body's `id` stays the one the receiver first
 * saw, and it deduplicates by it), with `resend_of` naming the original, its trace (its attempts continue the
 * generation's trace) and a new id made now, so they
 * queue behind what the endpoint has pending and go out in the order given. One statement for any number.
 * Returns the new ids in order (an original not of this endpoint is skipped).
 */
export async function insertResends(tx: Unit, endpointId: string, originals: string[], now: number): Promise<string[]> {
  if (originals.length === 0) return [];
  const at = new Date(now);
  const pairs = originals.map((original) => ({ id: newId('dlv', now), original }));
  const made = new Set(await insertResendCopies(tx, endpointId, pairs, at));
  return pairs.filter((p) => made.has(p.id)).map((p) => p.id);
}

/** A first delivery of a stored event to an endpoint that never had one (replay): its body's id is its own. */
export async function insertFirstDelivery(
  tx: Unit,
  endpoint: { id: string; workspaceId: string },
  event: { id: string; generationId: string | null; eventType: string; rest: string },
  now: number,
): Promise<string> {
  const id = newId('dlv', now);
  const at = new Date(now);
  await insertFirst(
    tx,
    {
      id,
      endpointId: endpoint.id,
      workspaceId: endpoint.workspaceId,
      generationId: event.generationId,
      eventType: event.eventType,
      eventId: event.id,
      body: bodyOf(id, event.rest),
    },
    at,
  );
  return id;
}

export { readDelivery } from '../../persistence/stores/webhooks/deliveries.ts';

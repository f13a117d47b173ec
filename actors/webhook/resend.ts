import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../persistence/ids.ts';
import { WebhookDeliveryEntity, type WebhookDeliveryRow } from '../../persistence/entities/webhook.ts';
import { bodyOf } from './events.ts';

/**
 * Makes new pending deliveries that send `originals` (delivery ids of one endpoint) again, in that order:
 * each a copy of its original's body, byte for byte (so the body's `id` stays the one the receiver first
 * saw, and it deduplicates by it), with `resend_of` naming the original, its trace (its attempts continue the
 * generation's trace) and a new id made now, so they
 * queue behind what the endpoint has pending and go out in the order given. One statement for any number.
 * Returns the new ids in order (an original not of this endpoint is skipped).
 */
export async function insertResends(em: SqlEntityManager, endpointId: string, originals: string[], now: number): Promise<string[]> {
  if (originals.length === 0) return [];
  const at = new Date(now);
  const pairs = originals.map((original) => ({ id: newId('dlv', now), original }));
  const rows = await em.execute<Array<{ id: string }>>(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, resend_of, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at, trace_parent)
     select v.id, o.endpoint_id, o.workspace_id, o.generation_id, o.event_type, o.event_id, o.id, o.body, 'pending', '[]'::jsonb, 0, ?, ?, ?, o.trace_parent
     from jsonb_to_recordset(?::jsonb) as v(id text, original text)
     join webhook_deliveries o on o.id = v.original and o.endpoint_id = ?
     returning id`,
    [at, at, at, JSON.stringify(pairs), endpointId],
  );
  const made = new Set(rows.map((r) => r.id));
  return pairs.filter((p) => made.has(p.id)).map((p) => p.id);
}

/** A first delivery of a stored event to an endpoint that never had one (replay): its body's id is its own. */
export async function insertFirstDelivery(
  em: SqlEntityManager,
  endpoint: { id: string; workspaceId: string },
  event: { id: string; generationId: string | null; eventType: string; rest: string },
  now: number,
): Promise<string> {
  const id = newId('dlv', now);
  const at = new Date(now);
  await em.execute(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, resend_of, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at)
     values (?, ?, ?, ?, ?, ?, null, ?, 'pending', '[]'::jsonb, 0, ?, ?, ?)`,
    [id, endpoint.id, endpoint.workspaceId, event.generationId, event.eventType, event.id, bodyOf(id, event.rest), at, at, at],
  );
  return id;
}

/** A delivery as the API shows it, read in the transaction that made it. */
export async function readDelivery(em: SqlEntityManager, id: string): Promise<WebhookDeliveryRow> {
  return em.findOneOrFail(WebhookDeliveryEntity, { id });
}

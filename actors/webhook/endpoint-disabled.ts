import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../persistence/ids.ts';
import { bodyOf, writeEvents, type EmittedEvent } from './events.ts';
import { holdSubscriptions } from './subscription-lock.ts';
import type { DeliveryState } from './machine.ts';

export const ENDPOINT_DISABLED_EVENT = 'webhook_endpoint.disabled';

/**
 * In the transaction that disables an endpoint by itself (auto-disable): its row becomes disabled with
 * the reason, the `webhook_endpoint.disabled` event is kept, and a delivery of it is made for each other
 * active endpoint of the workspace that subscribes to it. Returns those endpoints, to wake after the commit.
 */
export async function writeEndpointDisabled(
  em: SqlEntityManager,
  endpoint: { id: string; workspaceId: string; url: string },
  reason: string,
  health: { failingSince: number | undefined; consecutiveExpired: number },
  now: number,
): Promise<string[]> {
  const at = new Date(now);
  await em.execute(
    `update webhook_endpoints set status = 'disabled', disabled_reason = ?, failing_since = ?, consecutive_expired = ?, updated_at = ?
     where id = ? and deleted_at is null returning id`,
    [reason, health.failingSince === undefined ? null : new Date(health.failingSince), health.consecutiveExpired, at, endpoint.id],
  );
  const event: EmittedEvent = {
    id: newId('evt', now),
    workspaceId: endpoint.workspaceId,
    generationId: null,
    eventType: ENDPOINT_DISABLED_EVENT,
    rest: JSON.stringify({
      event: ENDPOINT_DISABLED_EVENT,
      data: { endpointId: endpoint.id, workspaceId: endpoint.workspaceId, url: endpoint.url, status: 'disabled', reason, disabledAt: at.toISOString() },
      createdAt: at.toISOString(),
    }).slice(1),
    createdAt: at,
  };
  await writeEvents(em, [event]);
  // The same rule as a generation's event: an endpoint being created now either gets it or comes after.
  await holdSubscriptions(em, [endpoint.workspaceId]);
  const subscribers = await em.execute<Array<{ id: string }>>(
    `select id from webhook_endpoints where workspace_id = ? and id <> ? and status = 'active' and deleted_at is null
       and event_types @> jsonb_build_array(?::text) order by id`,
    [endpoint.workspaceId, endpoint.id, ENDPOINT_DISABLED_EVENT],
  );
  if (subscribers.length === 0) return [];
  const rows = subscribers.map((s) => {
    const id = newId('dlv', now);
    return { id, endpoint_id: s.id, body: bodyOf(id, event.rest) };
  });
  await em.execute(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, resend_of, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at)
     select v.id, v.endpoint_id, ?, null, ?, ?, null, v.body, 'pending', '[]'::jsonb, 0, ?, ?, ?
     from jsonb_to_recordset(?::jsonb) as v(id text, endpoint_id text, body text)`,
    [endpoint.workspaceId, ENDPOINT_DISABLED_EVENT, event.id, at, at, at, JSON.stringify(rows)],
    'run',
  );
  return subscribers.map((s) => s.id);
}

/** The health columns after a change that needs no disabling (the first failed attempt, an expiry, a success after failures). */
export async function writeEndpointHealth(
  em: SqlEntityManager,
  endpointId: string,
  health: { failingSince: number | undefined; consecutiveExpired: number },
): Promise<void> {
  await em.execute('update webhook_endpoints set failing_since = ?, consecutive_expired = ? where id = ? returning id', [
    health.failingSince === undefined ? null : new Date(health.failingSince),
    health.consecutiveExpired,
    endpointId,
  ]);
}

/** A delivery's final state, written whatever it was (the disabling transaction settles the head delivery with it). */
export async function writeDeliveryFinal(em: SqlEntityManager, id: string, state: DeliveryState, now: number): Promise<void> {
  await em.execute(
    `update webhook_deliveries set status = ?, attempts = ?::jsonb, attempt_count = ?, next_attempt_at = null, failure_reason = ?, updated_at = ?
     where id = ? returning id`,
    [state.status, JSON.stringify(state.attempts), state.attempts.length, state.failureReason ?? null, new Date(now), id],
  );
}

import type { Transaction } from '../../persistence/stores/transaction.ts';
import { newId } from '../../persistence/ids.ts';
import { holdSubscriptions, subscribedEndpoints, writeEndpointDisabled as writeDisabledRow } from '../../persistence/stores/webhooks/endpoints.ts';
import { insertEventToEndpoints } from '../../persistence/stores/webhooks/deliveries.ts';
import { bodyOf, type EmittedEvent } from './events.ts';
import { insertEvents } from '../../persistence/stores/webhooks/events.ts';

export const ENDPOINT_DISABLED_EVENT = 'webhook_endpoint.disabled';

/**
 * In the transaction that disables an endpoint by itself (auto-disable): its row becomes disabled with
 * the reason, the `webhook_endpoint.disabled` event is kept, and a delivery of it is made for each other
 * active endpoint of the workspace that subscribes to it. Returns those endpoints, to wake after the commit.
 */
export async function writeEndpointDisabled(
  em: Transaction,
  endpoint: { id: string; workspaceId: string; url: string },
  reason: string,
  health: { failingSince: number | undefined; consecutiveExpired: number },
  now: number,
): Promise<string[]> {
  const at = new Date(now);
  await writeDisabledRow(em, endpoint.id, reason, health, at);
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
  await insertEvents(em, [event]);
  // The same rule as a generation's event: an endpoint being created now either gets it or comes after.
  await holdSubscriptions(em, [endpoint.workspaceId]);
  const subscribers = await subscribedEndpoints(em, endpoint.workspaceId, ENDPOINT_DISABLED_EVENT, endpoint.id);
  if (subscribers.length === 0) return [];
  const rows = subscribers.map((endpointId) => {
    const id = newId('dlv', now);
    return { id, endpoint_id: endpointId, body: bodyOf(id, event.rest) };
  });
  await insertEventToEndpoints(em, { id: event.id, workspaceId: endpoint.workspaceId, eventType: ENDPOINT_DISABLED_EVENT }, rows, at);
  return subscribers;
}

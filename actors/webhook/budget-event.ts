import type { Transaction } from '../../persistence/stores/transaction.ts';
import { holdSubscriptions, subscribedEndpoints } from '../../persistence/stores/webhooks/endpoints.ts';
import { insertEndpointDeliveries } from '../../persistence/stores/webhooks/deliveries.ts';
import type { ClaimedCrossing } from '../../persistence/budgets.ts';
import { newId } from '../../persistence/ids.ts';
import { bodyOf, type EmittedEvent } from './events.ts';
import { insertEvents } from '../../persistence/stores/webhooks/events.ts';

export const BUDGET_EVENT = 'budget.threshold_crossed';

/** The event's `data` (docs/webhooks.md, budget.threshold_crossed). */
export function budgetEventData(workspaceId: string, c: ClaimedCrossing): Record<string, unknown> {
  return {
    workspaceId,
    kind: c.kind,
    threshold: c.threshold,
    unit: c.kind === 'wallet_balance' ? 'cents' : 'percent',
    apiKeyId: c.subject === '' ? null : c.subject,
    period: c.period,
    ...c.details,
    crossedAt: c.crossedAt.toISOString(),
  };
}

/**
 * In the transaction that claimed the crossings (persistence/budgets.ts claimCrossings): keeps one
 * `budget.threshold_crossed` event per crossing, with the id the crossing row holds, and a delivery of
 * each to every active endpoint of the workspace that subscribes to it. Returns those endpoints, to wake
 * after the commit; the deliveries are signed and retried as any other (actors/webhook/actor.ts).
 */
export async function writeBudgetEvents(em: Transaction, workspaceId: string, crossings: ClaimedCrossing[]): Promise<string[]> {
  if (crossings.length === 0) return [];
  const events: EmittedEvent[] = crossings.map((c) => ({
    id: c.eventId,
    workspaceId,
    generationId: null,
    eventType: BUDGET_EVENT,
    rest: JSON.stringify({ event: BUDGET_EVENT, data: budgetEventData(workspaceId, c), createdAt: c.crossedAt.toISOString() }).slice(1),
    createdAt: c.crossedAt,
  }));
  await insertEvents(em, events);
  // The same rule as a generation's event: an endpoint being created now either gets it or comes after.
  await holdSubscriptions(em, [workspaceId]);
  const subscribers = await subscribedEndpoints(em, workspaceId, BUDGET_EVENT);
  if (subscribers.length === 0) return [];
  const rows = events.flatMap((event) =>
    subscribers.map((endpointId) => {
      const id = newId('dlv', event.createdAt.getTime());
      return { id, endpoint_id: endpointId, event_id: event.id, body: bodyOf(id, event.rest), at: event.createdAt };
    }),
  );
  await insertEndpointDeliveries(em, workspaceId, BUDGET_EVENT, rows);
  return subscribers;
}

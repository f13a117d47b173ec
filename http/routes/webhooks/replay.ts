import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { workspaceOfRow } from '../../owner.ts';
import { findEvent, replayEvent } from '../../../actors/webhook/replay.ts';
import { readDelivery } from '../../../actors/webhook/resend.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { openEndpoint, requireActive } from './access.ts';
import { DeliveryOut, toDeliveryOut, WebhookParams } from './shapes.ts';

export const ReplayIn = Type.Object(
  {
    workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'The workspace; an API key must name its own.' })),
    eventId: Type.String({ minLength: 1, maxLength: 64, description: 'The event to send (evt_…, from GET /v1/events).' }),
  },
  { additionalProperties: false },
);

export const replayWebhookEvent = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/:id/replay',
  operationId: 'replayWebhookEvent',
  summary: 'Send one event of the workspace (GET /v1/events) to this endpoint',
  description:
    "Queues a delivery of one stored event to this endpoint, also one made before the endpoint existed. If the endpoint had a delivery of it still in its history, that body is sent again (same id, so the receiver deduplicates); otherwise the new delivery's id is the body's id. The endpoint must subscribe to the event's type and be active (409 otherwise).",
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  errors: ['conflict'],
  owner: workspaceOfRow('webhook_endpoints'),
  params: WebhookParams,
  body: ReplayIn,
  responses: { 201: DeliveryOut },
  handler: async ({ auth, params, body, services }) => {
    const endpoint = await openEndpoint(openUnit(services.db), auth, params.id, body.workspaceId);
    const event = await findEvent(openUnit(services.db), endpoint.workspaceId, body.eventId);
    if (!event) throw new ApiError('not_found', `No event ${body.eventId}.`);
    requireActive(endpoint);
    if (!endpoint.eventTypes.includes(event.eventType)) {
      throw new ApiError('conflict', `The endpoint does not subscribe to ${event.eventType}; add it to its eventTypes first.`);
    }
    const now = services.clock.now();
    const row = await inTransaction(openUnit(services.db), async (tx) => readDelivery(tx, await replayEvent(tx, endpoint, event, now)));
    services.actors.tell('whk', endpoint.id, { type: 'wake' });
    return { status: 201, body: toDeliveryOut(row) };
  },
});

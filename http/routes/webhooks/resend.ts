import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { workspaceOfRow } from '../../owner.ts';
import { insertResends, readDelivery } from '../../../actors/webhook/resend.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { openEndpoint, requireActive } from './access.ts';
import { DeliveryOut, toDeliveryOut, WorkspaceQuery } from './shapes.ts';

export const resendDelivery = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/:id/deliveries/:deliveryId/resend',
  operationId: 'resendWebhookDelivery',
  summary: 'Send one delivery again, in any state: a new delivery that keeps the original body and its id',
  description:
    "Queues a new delivery that sends this one again, whatever its state: the body is the original's byte for byte (its `id` is the one the receiver first saw, so it deduplicates), the X-Service-Delivery header is the new delivery's id, and `resendOf` links the two. It goes out after what the endpoint already has pending. A disabled endpoint is 409: enable it first.",
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  errors: ['conflict'],
  owner: workspaceOfRow('webhook_endpoints'),
  params: Type.Object(
    {
      id: Type.String({ minLength: 1, maxLength: 64, description: 'Endpoint id (whk_…).' }),
      deliveryId: Type.String({ minLength: 1, maxLength: 64, description: 'Delivery id (dlv_…) of this endpoint.' }),
    },
    { additionalProperties: false },
  ),
  query: WorkspaceQuery,
  responses: { 201: DeliveryOut },
  handler: async ({ auth, params, query, services }) => {
    const endpoint = await openEndpoint(openUnit(services.db), auth, params.id, query.workspaceId);
    requireActive(endpoint);
    const now = services.clock.now();
    const row = await inTransaction(openUnit(services.db), async (tx) => {
      const [id] = await insertResends(tx, endpoint.id, [params.deliveryId], now);
      if (id === undefined) throw new ApiError('not_found', `No delivery ${params.deliveryId} of endpoint ${endpoint.id}.`);
      return readDelivery(tx, id);
    });
    services.actors.tell('whk', endpoint.id, { type: 'wake' });
    return { status: 201, body: toDeliveryOut(row) };
  },
});

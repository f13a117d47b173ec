import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, pageOf } from '../../pagination.ts';
import { listEndpointDeliveries } from '../../../persistence/stores/webhooks/deliveries.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { DELIVERIES_KEPT } from '../../../actors/webhook/retention.ts';
import { openEndpoint } from './access.ts';
import { DeliveryOut, DeliveryStatusOut, toDeliveryOut, WebhookParams } from './shapes.ts';

export const listDeliveries = defineRoute({
  method: 'GET',
  path: '/v1/webhooks/:id/deliveries',
  operationId: 'listWebhookDeliveries',
  summary: 'The most recent deliveries of an endpoint (100 by default), newest first, with their attempts and status',
  description: 'The most recent deliveries to an endpoint (100 by default), newest first, with their attempts and status.',
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  params: WebhookParams,
  query: Type.Object(
    {
      workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'The workspace; an API key must name its own.' })),
      status: Type.Optional(DeliveryStatusOut),
      limit: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: DELIVERIES_KEPT,
          default: DELIVERIES_KEPT,
          description: `Items per page, 1 to ${DELIVERIES_KEPT} (default ${DELIVERIES_KEPT}).`,
        }),
      ),
      cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'The nextCursor of the previous page.' })),
    },
    { additionalProperties: false },
  ),
  responses: { 200: Page(DeliveryOut) },
  handler: async ({ auth, params, query, services }) => {
    const unit = openUnit(services.db);
    const endpoint = await openEndpoint(unit, auth, params.id, query.workspaceId);
    const limit = query.limit ?? DELIVERIES_KEPT;
    // Ids are time-sortable: newest first is id descending, and the id alone is the keyset.
    const before = query.cursor ? (decodeCursor(query.cursor, ['string'])[0] as string) : undefined;
    // Outcomes decided but not yet committed would show as pending a moment longer; write them first.
    await services.writer.flush();
    const rows = await listEndpointDeliveries(unit, endpoint, { status: query.status, before }, limit + 1);
    return { body: pageOf(rows, limit, (row) => [row.id], toDeliveryOut) };
  },
});

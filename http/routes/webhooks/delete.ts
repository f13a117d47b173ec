import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openEndpoint } from './access.ts';
import { WebhookDeletedOut, WebhookParams, WorkspaceQuery } from './shapes.ts';
import { workspaceOfRow } from '../../owner.ts';

export const deleteWebhook = defineRoute({
  method: 'DELETE',
  path: '/v1/webhooks/:id',
  operationId: 'deleteWebhook',
  summary: 'Delete an endpoint: nothing more is sent to it and its pending deliveries become failed',
  description: 'Deletes an endpoint: nothing more is sent to it, and its pending deliveries become failed.',
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  owner: workspaceOfRow('webhook_endpoints'),
  params: WebhookParams,
  query: WorkspaceQuery,
  responses: { 200: WebhookDeletedOut },
  handler: async ({ auth, params, query, services }) => {
    await openEndpoint(openUnit(services.db), auth, params.id, query.workspaceId);
    const row = await services.actors.ask('whk', params.id, { type: 'delete' });
    if (!row) throw new ApiError('not_found', `No webhook endpoint ${params.id}.`);
    return { body: { id: params.id, deleted: true as const } };
  },
});

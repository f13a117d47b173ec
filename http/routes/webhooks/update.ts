import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import type { EndpointPatch, EndpointReply } from '../../../actors/webhook/protocol.ts';
import { checkEndpointUrl, openEndpoint } from './access.ts';
import { toWebhookOut, WebhookOut, WebhookParams, WebhookPatch } from './shapes.ts';
import { workspaceOfRow } from '../../owner.ts';

export const updateWebhook = defineRoute({
  method: 'PATCH',
  path: '/v1/webhooks/:id',
  operationId: 'updateWebhook',
  summary: 'Change an endpoint\'s url, event types, description or status; disabling it fails its pending deliveries',
  description: 'Changes an endpoint\'s url, event types, description or status; disabling it fails its pending deliveries.',
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  owner: workspaceOfRow('webhook_endpoints'),
  params: WebhookParams,
  body: WebhookPatch,
  responses: { 200: WebhookOut },
  handler: async ({ auth, params, body, services }) => {
    const { workspaceId, ...fields } = body;
    if (Object.keys(fields).length === 0) throw new ApiError('validation_error', 'body: give at least one of url, eventTypes, description, status');
    await openEndpoint(services.db.em(), auth, params.id, workspaceId);
    const patch: EndpointPatch = { ...fields };
    if (fields.url !== undefined) patch.url = await checkEndpointUrl(fields.url, { allowPrivate: services.config.allowPrivateEgress, allowLoopback: services.config.allowLoopbackEgress });
    // The endpoint's actor is the single writer of its state: the change is serialised with its deliveries.
    const row = await services.actors.ask<EndpointReply>('whk', params.id, { type: 'update', patch });
    if (!row) throw new ApiError('not_found', `No webhook endpoint ${params.id}.`);
    return { body: toWebhookOut(row) };
  },
});

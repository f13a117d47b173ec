import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import type { EndpointPatch } from '../../../actors/webhook/protocol.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { checkEndpointUrl, openEndpoint } from './access.ts';
import { toWebhookOut, WebhookParams, WebhookPatch, WebhookUpdatedOut } from './shapes.ts';
import { newEndpointSecret } from '../../../actors/webhook/signing.ts';
import { workspaceOfRow } from '../../owner.ts';

export const updateWebhook = defineRoute({
  method: 'PATCH',
  path: '/v1/webhooks/:id',
  operationId: 'updateWebhook',
  summary: "Change an endpoint's url, event types, description, status or signature scheme; disabling it fails its pending deliveries",
  description:
    "Changes an endpoint's url, event types, description, status or signature scheme; disabling it fails its pending deliveries. A new signature scheme comes with a new secret of its form, in this answer only.",
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  owner: workspaceOfRow('webhook_endpoints'),
  params: WebhookParams,
  body: WebhookPatch,
  responses: { 200: WebhookUpdatedOut },
  handler: async ({ auth, params, body, services }) => {
    const { workspaceId, ...fields } = body;
    if (Object.keys(fields).length === 0)
      throw new ApiError('validation_error', 'body: give at least one of url, eventTypes, description, status, signatureScheme');
    const current = await openEndpoint(openUnit(services.db), auth, params.id, workspaceId);
    const { signatureScheme, ...rest } = fields;
    const patch: EndpointPatch = { ...rest };
    let secret: string | undefined;
    if (signatureScheme !== undefined && signatureScheme !== current.signatureScheme) {
      secret = newEndpointSecret(signatureScheme);
      patch.scheme = { signatureScheme, secretSealed: services.webhookSecrets.seal(secret, params.id) };
    }
    if (fields.url !== undefined)
      patch.url = await checkEndpointUrl(fields.url, { allowPrivate: services.config.allowPrivateEgress, allowLoopback: services.config.allowLoopbackEgress });
    // The endpoint's actor is the single writer of its state: the change is serialised with its deliveries.
    const row = await services.actors.ask('whk', params.id, { type: 'update', patch });
    if (!row) throw new ApiError('not_found', `No webhook endpoint ${params.id}.`);
    if (secret === undefined) return { body: toWebhookOut(row) };
    return { headers: { 'Cache-Control': 'no-store' }, body: { ...toWebhookOut(row), secret } };
  },
});

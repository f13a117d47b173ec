import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { countLiveEndpoints, insertEndpoint } from '../../../persistence/stores/webhooks/endpoints.ts';
import type { WebhookEndpointRow } from '../../../persistence/stores/webhooks/rows.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { MAX_ENDPOINTS_PER_WORKSPACE } from '../../../actors/webhook/enqueue.ts';
import { newEndpointSecret } from '../../../actors/webhook/signing.ts';
import { checkEndpointUrl, openWebhookWorkspace } from './access.ts';
import { toWebhookOut, WebhookCreatedOut, WebhookIn } from './shapes.ts';

export const createWebhook = defineRoute({
  method: 'POST',
  path: '/v1/webhooks',
  operationId: 'createWebhook',
  summary: 'Create a webhook endpoint for some event types; its signing secret is in this answer only',
  description:
    'Creates a webhook endpoint that receives the chosen event types, signed with a secret that is in this answer only. The URL must be http(s) and resolve to public addresses; a workspace has a limited number of endpoints (422).',
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  errors: ['not_found', 'plan_limit_reached'],
  body: WebhookIn,
  responses: { 201: WebhookCreatedOut },
  handler: async ({ auth, body, services }) => {
    const url = await checkEndpointUrl(body.url, { allowPrivate: services.config.allowPrivateEgress, allowLoopback: services.config.allowLoopbackEgress });
    const now = services.clock.now();
    const at = new Date(now);
    const id = newId('whk', now);
    const signatureScheme = body.signatureScheme ?? 'x-service';
    const secret = newEndpointSecret(signatureScheme);
    const row: WebhookEndpointRow = {
      id,
      workspaceId: body.workspaceId,
      url,
      description: body.description ?? null,
      eventTypes: body.eventTypes,
      status: body.status ?? 'active',
      secretSealed: services.webhookSecrets.seal(secret, id),
      signatureScheme,
      previousSecretSealed: null,
      previousSecretExpiresAt: null,
      createdAt: at,
      updatedAt: at,
      deletedAt: null,
      disabledReason: null,
      failingSince: null,
      consecutiveExpired: 0,
    };
    await inTransaction(openUnit(services.db), async (tx) => {
      // The workspace lock serialises creations, so the count below still holds at commit.
      await openWebhookWorkspace(tx, auth, body.workspaceId, { lock: true });
      const count = await countLiveEndpoints(tx, body.workspaceId);
      if (count >= MAX_ENDPOINTS_PER_WORKSPACE) {
        throw new ApiError('plan_limit_reached', `A workspace can have ${MAX_ENDPOINTS_PER_WORKSPACE} webhook endpoints; delete one first.`);
      }
      await insertEndpoint(tx, row);
    });
    return { status: 201, headers: { 'Cache-Control': 'no-store' }, body: { ...toWebhookOut(row), secret } };
  },
});

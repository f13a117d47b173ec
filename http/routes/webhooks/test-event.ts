import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { openEndpointSecrets } from '../../../actors/webhook/endpoint-secrets.ts';
import { sendTestEvent, TEST_EVENT } from '../../../actors/webhook/test-event.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openEndpoint } from './access.ts';
import { WebhookParams } from './shapes.ts';

export const TestEventOut = Type.Object(
  {
    id: Type.String({ description: "The test event's id (dlv_…), its body's id and X-Service-Delivery / webhook-id; it is in no delivery history." }),
    event: Type.Literal(TEST_EVENT),
    delivered: Type.Boolean({ description: 'Whether the endpoint answered 2xx.' }),
    responseStatus: Type.Union([Type.Integer(), Type.Null()], { description: 'The HTTP status answered; null when there was no answer.' }),
    durationMs: Type.Integer({ minimum: 0 }),
    error: Type.Union([Type.String(), Type.Null()], {
      description: 'Why it failed, as in a delivery attempt (non-2xx status, timeout, network_error, blocked_address); null when delivered.',
    }),
  },
  { additionalProperties: false },
);

export const testWebhook = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/:id/test',
  operationId: 'testWebhook',
  summary: 'Send a signed webhook.test event to an endpoint now and answer what came of that one attempt',
  description:
    "Sends one signed webhook.test event to the endpoint now, as a delivery is sent (its scheme and secrets, the egress guard, the time-out), and answers its outcome. It is not recorded as a delivery, is never retried, and does not wait for or delay the endpoint's deliveries.",
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  errors: ['conflict'],
  params: WebhookParams,
  responses: { 200: TestEventOut },
  handler: async ({ auth, params, query, services }) => {
    const workspaceId = (query as { workspaceId?: string }).workspaceId;
    const endpoint = await openEndpoint(openUnit(services.db), auth, params.id, workspaceId);
    const now = services.clock.now();
    const { secret, previousSecret } = openEndpointSecrets(endpoint, services.webhookSecrets, now);
    if (secret === undefined)
      throw new ApiError('conflict', "The endpoint's signing secret cannot be opened with this service's WEBHOOK_SECRET_KEY; rotate it to get one that can.");
    const outcome = await sendTestEvent(
      { ...endpoint, secret, previousSecret },
      {
        now,
        timeoutMs: services.config.webhooks.timeoutMs,
        allowPrivateEgress: services.config.allowPrivateEgress,
        allowLoopbackEgress: services.config.allowLoopbackEgress,
        tracer: services.tracer,
      },
    );
    return { headers: { 'Cache-Control': 'no-store' }, body: outcome };
  },
});

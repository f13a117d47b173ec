import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { DEFAULT_ROTATION_GRACE_SECONDS, MAX_ROTATION_GRACE_SECONDS } from '../../../actors/webhook/rotate-secret.ts';
import { newEndpointSecret } from '../../../actors/webhook/signing.ts';
import { workspaceOfRow } from '../../owner.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openEndpoint } from './access.ts';
import { SecretField, WebhookParams } from './shapes.ts';

export const RotateSecretIn = Type.Object(
  {
    gracePeriodSeconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_ROTATION_GRACE_SECONDS,
        default: DEFAULT_ROTATION_GRACE_SECONDS,
        description: `How long the replaced secret keeps signing beside the new one, 0 to ${MAX_ROTATION_GRACE_SECONDS} seconds (default ${DEFAULT_ROTATION_GRACE_SECONDS}: a day); 0 ends it at once.`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const RotatedSecretOut = Type.Object(
  {
    id: Type.String({ description: 'The endpoint (whk_…).' }),
    secret: SecretField,
    previousSecretExpiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'Until then every delivery is signed with both secrets; null when the grace period is 0.',
    }),
  },
  { additionalProperties: false },
);

export const rotateWebhookSecret = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/:id/rotate-secret',
  operationId: 'rotateWebhookSecret',
  summary: "Replace an endpoint's signing secret; the old one keeps signing beside it for a grace period (default 24 h)",
  description:
    'Makes a new signing secret, in this answer only. For the grace period (default a day, at most a week) every delivery is signed with both the new and the replaced secret, so receivers can switch without a gap; afterwards with the new one only.',
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  owner: workspaceOfRow('webhook_endpoints'),
  params: WebhookParams,
  body: RotateSecretIn,
  bodyOptional: true,
  responses: { 200: RotatedSecretOut },
  handler: async ({ auth, params, query, body, services }) => {
    const workspaceId = (query as { workspaceId?: string }).workspaceId;
    const endpoint = await openEndpoint(openUnit(services.db), auth, params.id, workspaceId);
    const secret = newEndpointSecret(endpoint.signatureScheme);
    const graceSeconds = body?.gracePeriodSeconds ?? DEFAULT_ROTATION_GRACE_SECONDS;
    // The endpoint's actor is the single writer of its secrets: deliveries signed after this answer carry both.
    const row = await services.actors.ask('whk', params.id, {
      type: 'rotate_secret',
      secretSealed: services.webhookSecrets.seal(secret, params.id),
      graceSeconds,
    });
    if (!row) throw new ApiError('not_found', `No webhook endpoint ${params.id}.`);
    return {
      headers: { 'Cache-Control': 'no-store' },
      body: { id: row.id, secret, previousSecretExpiresAt: row.previousSecretExpiresAt?.toISOString() ?? null },
    };
  },
});

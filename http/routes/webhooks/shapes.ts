import { Type, type Static } from '@sinclair/typebox';
import { SUBSCRIBABLE_EVENT_TYPES } from '../../../actors/webhook/machine.ts';
import type { WebhookDeliveryRow, WebhookEndpointRow } from '../../../persistence/stores/webhooks/rows.ts';

/** Request and response shapes of webhook endpoints and deliveries, and the one mapper each from row to Out. */

const Time = (description: string) => Type.String({ format: 'date-time', description });
const WorkspaceIdField = Type.String({ minLength: 1, maxLength: 64, description: 'The workspace; an API key must name its own.' });

export const EventType = Type.Union(
  SUBSCRIBABLE_EVENT_TYPES.map((name) => Type.Literal(name)),
  {
    description:
      'An event name: generation.completed, generation.failed, generation.cancelled or generation.expired; webhook_endpoint.disabled (another endpoint of the workspace was disabled by the service); budget.threshold_crossed (a budget alert, docs/money.md); generation.started, an opt-in extension sent only to endpoints that name it.',
  },
);
export const EventTypes = Type.Array(EventType, { minItems: 1, maxItems: SUBSCRIBABLE_EVENT_TYPES.length, uniqueItems: true });
export const SignatureSchemeField = Type.Union([Type.Literal('x-service'), Type.Literal('standard')], {
  description:
    'How deliveries are signed: x-service (X-Service-Signature, the default) or standard (the Standard Webhooks headers webhook-id, webhook-timestamp, webhook-signature).',
});
/** A secret of either scheme: base64url for x-service, standard base64 of 32 bytes for standard. */
export const SecretField = Type.String({
  pattern: '^whsec_([A-Za-z0-9_-]{43}|[A-Za-z0-9+/]{43}=)$',
  description: 'The signing secret, shown this once. x-service: the whole string is the HMAC key; standard: the base64 after whsec_ is.',
});
export const EndpointUrl = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: 'http(s) URL that receives the deliveries; it must pass the egress guard (public addresses only).',
});
export const EndpointDescription = Type.Union([Type.String({ maxLength: 500 }), Type.Null()], { description: 'Free text, up to 500 characters.' });
export const EndpointStatus = Type.Union([Type.Literal('active'), Type.Literal('disabled')], {
  description: 'disabled: no new deliveries, and pending ones become failed.',
});

export const WebhookParams = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: 64, description: 'Endpoint id (whk_…).' }) },
  { additionalProperties: false },
);

export const WebhookIn = Type.Object(
  {
    workspaceId: WorkspaceIdField,
    url: EndpointUrl,
    eventTypes: EventTypes,
    description: Type.Optional(EndpointDescription),
    status: Type.Optional(EndpointStatus),
    signatureScheme: Type.Optional(SignatureSchemeField),
  },
  { additionalProperties: false },
);

export const WebhookPatch = Type.Object(
  {
    workspaceId: Type.Optional(WorkspaceIdField),
    url: Type.Optional(EndpointUrl),
    eventTypes: Type.Optional(EventTypes),
    description: Type.Optional(EndpointDescription),
    status: Type.Optional(EndpointStatus),
    signatureScheme: Type.Optional(SignatureSchemeField),
  },
  { additionalProperties: false },
);

export const WorkspaceQuery = Type.Object(
  {
    workspaceId: Type.Optional(WorkspaceIdField),
  },
  { additionalProperties: false },
);

export const WebhookOut = Type.Object(
  {
    id: Type.String({ description: 'whk_…' }),
    workspaceId: Type.String(),
    url: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    eventTypes: Type.Array(EventType),
    status: EndpointStatus,
    signatureScheme: SignatureSchemeField,
    previousSecretExpiresAt: Type.Union([Time('When the secret replaced by the last rotation stops signing (in the past: it has).'), Type.Null()]),
    disabledReason: Type.Union([Type.String(), Type.Null()], {
      description:
        'Why the service disabled the endpoint (its deliveries kept failing; docs/webhooks.md "Auto-disable"); null when active or disabled by PATCH.',
    }),
    createdAt: Time('When the endpoint was made.'),
    updatedAt: Time('Last change.'),
  },
  { additionalProperties: false },
);
export type WebhookOut = Static<typeof WebhookOut>;

/** Only the answer to creation carries the signing secret; it is never shown again. */
export const WebhookCreatedOut = Type.Object(
  {
    ...WebhookOut.properties,
    secret: SecretField,
  },
  { additionalProperties: false },
);

/** The answer to an update carries a secret only when the signature scheme changed (a new secret of its form). */
export const WebhookUpdatedOut = Type.Object(
  {
    ...WebhookOut.properties,
    secret: Type.Optional(SecretField),
  },
  { additionalProperties: false },
);

export const WebhookDeletedOut = Type.Object(
  {
    id: Type.String(),
    deleted: Type.Literal(true),
  },
  { additionalProperties: false },
);

export function toWebhookOut(row: WebhookEndpointRow): WebhookOut {
  return {
    id: row.id,
    workspaceId: row.workspaceId,
    url: row.url,
    description: row.description,
    eventTypes: row.eventTypes as WebhookOut['eventTypes'],
    status: row.status,
    signatureScheme: row.signatureScheme,
    previousSecretExpiresAt: row.previousSecretExpiresAt?.toISOString() ?? null,
    disabledReason: row.status === 'disabled' ? row.disabledReason : null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

export const AttemptOut = Type.Object(
  {
    attemptNumber: Type.Integer({ minimum: 1, maximum: 5 }),
    at: Time('When the attempt started.'),
    responseStatus: Type.Union([Type.Integer(), Type.Null()], { description: 'The HTTP status answered; null when there was no answer.' }),
    error: Type.Union([Type.String(), Type.Null()], {
      description: 'Why the attempt failed (non-2xx status, time-out, connection error, egress refusal); null when it succeeded.',
    }),
    durationMs: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);

export const DeliveryStatusOut = Type.Union(['pending', 'delivered', 'failed', 'expired'].map((s) => Type.Literal(s)));

export const DeliveryOut = Type.Object(
  {
    id: Type.String({
      description:
        "dlv_…, the X-Service-Delivery header; also the body's id, except for a re-sent delivery, whose body keeps the id of the delivery it re-sends (receivers deduplicate by the body's id).",
    }),
    endpointId: Type.String(),
    event: EventType,
    eventId: Type.Union([Type.String(), Type.Null()], {
      description: 'The event it carries (evt_…, GET /v1/events); null for deliveries made before events were kept.',
    }),
    resendOf: Type.Union([Type.String(), Type.Null()], {
      description: 'The delivery this one sends again (resend, recover or replay); null for a first delivery.',
    }),
    generationId: Type.Union([Type.String(), Type.Null()], { description: 'The generation of a generation event; null for an endpoint event.' }),
    status: DeliveryStatusOut,
    failureReason: Type.Union([Type.Literal('endpoint_disabled'), Type.Literal('endpoint_deleted'), Type.Literal('egress_refused'), Type.Null()], {
      description: 'Why a failed delivery stopped; null otherwise.',
    }),
    attempts: Type.Array(AttemptOut),
    nextAttemptAt: Type.Union([Time('When the next attempt is due (pending only).'), Type.Null()]),
    createdAt: Time("When the event happened (the commit of the generation's terminal state)."),
    updatedAt: Time('Last change.'),
  },
  { additionalProperties: false },
);
export type DeliveryOut = Static<typeof DeliveryOut>;

export function toDeliveryOut(row: WebhookDeliveryRow): DeliveryOut {
  return {
    id: row.id,
    endpointId: row.endpointId,
    event: row.eventType as DeliveryOut['event'],
    eventId: row.eventId,
    resendOf: row.resendOf,
    generationId: row.generationId,
    status: row.status,
    failureReason: row.failureReason as DeliveryOut['failureReason'],
    attempts: row.attempts,
    nextAttemptAt: row.status === 'pending' && row.nextAttemptAt ? row.nextAttemptAt.toISOString() : null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

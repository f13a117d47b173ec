import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { applyVerifiedEvent, workspaceOfPayment } from './provider-event.ts';
import { placeReadBody } from '../../pipeline/placement.ts';
import { readLimited } from '../../../runtime/read-limited.ts';

const MAX_EVENT_BYTES = 64 * 1024;

export const ProviderEventAck = Type.Object(
  {
    received: Type.Literal(true),
    applied: Type.Boolean({ description: 'false when the event changed nothing: a duplicate, or a payment no longer pending, or unknown.' }),
  },
  { additionalProperties: false },
);

export const receiveProviderEvent = defineRoute({
  method: 'POST',
  path: '/v1/billing/events/:provider',
  operationId: 'receiveBillingProviderEvent',
  summary:
    'Payment-provider events (payment.succeeded, payment.failed), signed in the X-Billing-Signature header; verified before anything is applied, and applied once',
  description:
    "Receives the payment provider's events (payment.succeeded, payment.failed), signed in the X-Billing-Signature header. The signature is verified before anything is applied, and each event is applied once however often it is sent.",
  tags: ['billing'],
  access: 'public',
  errors: ['payload_too_large', 'validation_error'],
  params: Type.Object({ provider: Type.String({ minLength: 1, maxLength: 32 }) }, { additionalProperties: false }),
  rawBody: 'stream',
  responses: { 200: ProviderEventAck },
  handler: async (ctx) => {
    const { params, headers, bodyStream, services } = ctx;
    const provider = services.billing.provider;
    if (params.provider !== provider.id) throw new ApiError('not_found', `No payment provider ${params.provider} on this service.`);
    const raw = await readLimited(bodyStream!, MAX_EVENT_BYTES, () => new ApiError('payload_too_large', `An event is at most ${MAX_EVENT_BYTES} bytes.`));
    const event = provider.verifyEvent(raw, headers['x-billing-signature']);
    if (!event) throw new ApiError('validation_error', 'The event signature (X-Billing-Signature) is missing, not valid, or too old.');
    const workspaceId = await workspaceOfPayment(services, event.paymentId);
    if (!workspaceId) return { body: { received: true, applied: false } };
    // Cluster mode: the node that runs the payment's workspace applies it; the very bytes received go there.
    const elsewhere = await placeReadBody(ctx, workspaceId, raw);
    if (elsewhere) return elsewhere;
    const result = await applyVerifiedEvent(services, provider.id, event, workspaceId);
    return { body: { received: true, applied: result.applied } };
  },
});

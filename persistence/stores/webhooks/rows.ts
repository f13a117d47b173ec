/** The rows of the webhook stores, as the layers above read them. */
export type { DeliveryAttempt, DeliveryStatus, SignatureScheme, WebhookDeliveryRow, WebhookEndpointRow } from '../../entities/webhook.ts';

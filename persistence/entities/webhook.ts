import { EntitySchema } from '@mikro-orm/core';

export type SignatureScheme = 'x-service' | 'standard';

/** A webhook endpoint of one workspace; its signing secret is stored sealed (AES-256-GCM), never in clear. */
export interface WebhookEndpointRow {
  id: string;
  workspaceId: string;
  url: string;
  description: string | null;
  eventTypes: string[];
  status: 'active' | 'disabled';
  secretSealed: string;
  /** How deliveries are signed: `x-service` (X-Service-Signature) or `standard` (Standard Webhooks). */
  signatureScheme: SignatureScheme;
  /** The secret the last rotation replaced, sealed like the current one; it signs too until it expires. */
  previousSecretSealed: string | null;
  previousSecretExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  /** Set by DELETE; the row and its deliveries are purged by the retention job later. */
  deletedAt: Date | null;
  /** Why the service disabled it (auto-disable); null when active or disabled by PATCH. */
  disabledReason: string | null;
  /** When its current run of failed attempts began; null once an attempt succeeds. */
  failingSince: Date | null;
  /** Deliveries expired in a row since the last one delivered. */
  consecutiveExpired: number;
}

export const WebhookEndpointEntity = new EntitySchema<WebhookEndpointRow>({
  name: 'WebhookEndpoint',
  tableName: 'webhook_endpoints',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string', fieldName: 'workspace_id' },
    url: { type: 'string' },
    description: { type: 'string', nullable: true },
    eventTypes: { type: 'json', columnType: 'jsonb', fieldName: 'event_types' },
    status: { type: 'string' },
    secretSealed: { type: 'string', fieldName: 'secret_sealed' },
    signatureScheme: { type: 'string', fieldName: 'signature_scheme', default: 'x-service' },
    previousSecretSealed: { type: 'string', fieldName: 'previous_secret_sealed', nullable: true },
    previousSecretExpiresAt: { type: 'Date', fieldName: 'previous_secret_expires_at', nullable: true },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
    deletedAt: { type: 'Date', fieldName: 'deleted_at', nullable: true },
    disabledReason: { type: 'string', fieldName: 'disabled_reason', nullable: true },
    failingSince: { type: 'Date', fieldName: 'failing_since', nullable: true },
    consecutiveExpired: { type: 'integer', fieldName: 'consecutive_expired' },
  },
});

export interface DeliveryAttempt {
  attemptNumber: number;
  at: string;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'expired';

/** One event for one endpoint: the exact body sent, its status and every attempt made. */
export interface WebhookDeliveryRow {
  id: string;
  endpointId: string;
  workspaceId: string;
  /** Null for an event about an endpoint (webhook_endpoint.disabled). */
  generationId: string | null;
  eventType: string;
  /** The event (GET /v1/events) this delivery carries; null for deliveries made before events were kept. */
  eventId: string | null;
  /** The delivery this one sends again (resend, recover, replay); its body is that delivery's, id included. */
  resendOf: string | null;
  body: string;
  status: DeliveryStatus;
  failureReason: string | null;
  attempts: DeliveryAttempt[];
  attemptCount: number;
  nextAttemptAt: Date | null;
  /** W3C traceparent of the work that made the delivery; every attempt continues that trace. */
  traceParent: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const WebhookDeliveryEntity = new EntitySchema<WebhookDeliveryRow>({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  properties: {
    id: { type: 'string', primary: true },
    endpointId: { type: 'string', fieldName: 'endpoint_id' },
    workspaceId: { type: 'string', fieldName: 'workspace_id' },
    generationId: { type: 'string', fieldName: 'generation_id', nullable: true },
    eventType: { type: 'string', fieldName: 'event_type' },
    eventId: { type: 'string', fieldName: 'event_id', nullable: true },
    resendOf: { type: 'string', fieldName: 'resend_of', nullable: true },
    body: { type: 'text' },
    status: { type: 'string' },
    failureReason: { type: 'string', fieldName: 'failure_reason', nullable: true },
    attempts: { type: 'json', columnType: 'jsonb' },
    attemptCount: { type: 'integer', fieldName: 'attempt_count' },
    nextAttemptAt: { type: 'Date', fieldName: 'next_attempt_at', nullable: true },
    traceParent: { type: 'string', fieldName: 'trace_parent', nullable: true },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
  },
});

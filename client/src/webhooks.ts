/**
 * Verifying a webhook delivery of the Generation Service, for receivers (docs/webhooks.md): node:crypto
 * only, built to plain JavaScript, importable as `@generation-service/client/webhooks` (and as
 * `generation-service/webhooks/verify` from the service's package).
 *
 *   import { verifyWebhook } from '@generation-service/client/webhooks';
 *   const event = verifyWebhook(rawBody, req.headers['x-service-signature'], process.env.WEBHOOK_SECRET);
 *
 * The header is `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the endpoint's whole
 * signing secret (`whsec_…`): the scheme of Stripe's `Stripe-Signature`, so Stripe-style verifiers accept it too.
 * The only copy of the check: the service's package exports this module built (generation-service/webhooks/verify),
 * and test/webhooks/verify.test.ts holds both the source and the build to what the signer (actors/webhook/signature.ts) signs.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-service-signature';
export const EVENT_HEADER = 'x-service-event';
export const DELIVERY_HEADER = 'x-service-delivery';
/** Timestamps further than this from now (either way) are refused, so a captured delivery cannot be replayed later. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type WebhookVerificationFailure = 'missing_header' | 'malformed_header' | 'timestamp_out_of_tolerance' | 'signature_mismatch' | 'invalid_body';

export class WebhookVerificationError extends Error {
  readonly code: WebhookVerificationFailure;
  constructor(code: WebhookVerificationFailure, message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
    this.code = code;
  }
}

export interface WebhookEvent {
  /** The delivery id (also in X-Service-Delivery): the same event may arrive more than once, deduplicate by it. */
  id: string;
  /** generation.started only reaches endpoints that name it (an extension); a test event (webhook.test) has data { endpointId, workspaceId }. */
  event: 'generation.completed' | 'generation.failed' | 'generation.cancelled' | 'generation.expired' | 'generation.started';
  data: {
    generationId: string;
    workspaceId: string;
    mode: string;
    modelId: string;
    status: string;
    outputAssetIds: string[];
    credits: number;
    startedAt: string | null;
    completedAt: string | null;
    errorCode?: string | null;
    errorMessage?: string | null;
  };
  createdAt: string;
}

export interface VerifyOptions {
  toleranceSeconds?: number;
  /** Now, in milliseconds since the epoch (default Date.now()). */
  now?: number;
}

/**
 * Checks the signature of a delivery against the raw body bytes exactly as received (not re-serialised
 * JSON) and returns the parsed event; throws WebhookVerificationError otherwise. Comparison is constant-time.
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  signatureHeader: string | string[] | null | undefined,
  secret: string,
  options: VerifyOptions = {},
): WebhookEvent {
  const header = Array.isArray(signatureHeader) ? signatureHeader[0] : signatureHeader;
  if (!header) throw new WebhookVerificationError('missing_header', `no ${SIGNATURE_HEADER} header`);
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === 't') {
      if (timestamp !== undefined || !/^\d{1,12}$/.test(value))
        throw new WebhookVerificationError('malformed_header', 'the header needs exactly one t=<unix seconds>');
      timestamp = Number(value);
    } else if (name === 'v1') {
      signatures.push(value);
    }
  }
  if (timestamp === undefined || signatures.length === 0)
    throw new WebhookVerificationError('malformed_header', 'the header needs t=<unix seconds> and v1=<signature>');
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const nowSeconds = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - timestamp) > tolerance) {
    throw new WebhookVerificationError('timestamp_out_of_tolerance', `the signature's timestamp is more than ${tolerance} s from now`);
  }
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest();
  // Every candidate is compared (no early exit), each in constant time.
  let matched = false;
  for (const candidate of signatures) {
    if (!/^[0-9a-f]{64}$/.test(candidate)) continue;
    if (timingSafeEqual(expected, Buffer.from(candidate, 'hex'))) matched = true;
  }
  if (!matched) throw new WebhookVerificationError('signature_mismatch', 'no v1 signature matches the body and the secret');
  let event: unknown;
  try {
    event = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid_body', 'the body is not JSON');
  }
  if (
    typeof event !== 'object' ||
    event === null ||
    typeof (event as { id?: unknown }).id !== 'string' ||
    typeof (event as { event?: unknown }).event !== 'string'
  ) {
    throw new WebhookVerificationError('invalid_body', 'the body is not an event');
  }
  return event as WebhookEvent;
}

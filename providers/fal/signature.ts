import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';

/**
 * fal's webhook signature (https://docs.fal.ai/model-endpoints/webhooks, "Verifying your webhook"): an
 * ED25519 signature, hex in `X-Fal-Webhook-Signature`, over the lines
 *   request id \n user id \n timestamp \n sha256-hex(raw body)
 * from the headers `X-Fal-Webhook-Request-Id`, `X-Fal-Webhook-User-Id` and `X-Fal-Webhook-Timestamp`
 * (Unix seconds, accepted within ±5 minutes). fal publishes its public keys as a JWKS
 * (https://rest.fal.ai/.well-known/jwks.json); the operator copies it into FAL_WEBHOOK_JWKS, so nothing is
 * fetched at run time.
 */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

export const WEBHOOK_HEADERS = {
  requestId: 'x-fal-webhook-request-id',
  userId: 'x-fal-webhook-user-id',
  timestamp: 'x-fal-webhook-timestamp',
  signature: 'x-fal-webhook-signature',
} as const;

/** The Ed25519 public keys of a JWKS document; other key types are skipped. Throws when it is not a JWKS. */
export function ed25519KeysOf(jwks: unknown): KeyObject[] {
  const keys = (jwks as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new Error('not a JWKS document (no "keys" array)');
  const found: KeyObject[] = [];
  for (const jwk of keys) {
    const { kty, crv, x } = (jwk ?? {}) as { kty?: unknown; crv?: unknown; x?: unknown };
    if (kty !== 'OKP' || crv !== 'Ed25519') continue;
    if (typeof x !== 'string' || Buffer.from(x, 'base64url').length !== 32) throw new Error('an Ed25519 key whose "x" is not 32 bytes of base64url');
    found.push(createPublicKey({ key: { kty, crv, x }, format: 'jwk' }));
  }
  return found;
}

/** The message fal signs, from the delivery's headers and its raw body. */
export function signedMessage(requestId: string, userId: string, timestamp: string, body: Buffer): Buffer {
  const digest = createHash('sha256').update(body).digest('hex');
  return Buffer.from(`${requestId}\n${userId}\n${timestamp}\n${digest}`, 'utf8');
}

export type SignatureCheck = { ok: true; requestId: string } | { ok: false; message: string };

/** Checks a delivery's signature and freshness against `keys`; says why when it fails (no secret to hide). */
export function checkWebhookSignature(headers: Record<string, string | undefined>, body: Buffer, now: number, keys: readonly KeyObject[]): SignatureCheck {
  if (keys.length === 0) return { ok: false, message: 'no fal webhook keys are configured (FAL_WEBHOOK_JWKS)' };
  const requestId = headers[WEBHOOK_HEADERS.requestId];
  const userId = headers[WEBHOOK_HEADERS.userId];
  const timestamp = headers[WEBHOOK_HEADERS.timestamp];
  const signature = headers[WEBHOOK_HEADERS.signature];
  if (!requestId || !userId || !timestamp || !signature) return { ok: false, message: 'a fal webhook signature header is missing' };
  if (!/^\d{1,12}$/.test(timestamp)) return { ok: false, message: 'the fal webhook timestamp is not a number of seconds' };
  if (Math.abs(now / 1000 - Number(timestamp)) > WEBHOOK_TOLERANCE_SECONDS) {
    return { ok: false, message: `the fal webhook timestamp is more than ${WEBHOOK_TOLERANCE_SECONDS} s away from now` };
  }
  // An Ed25519 signature is 64 bytes; crypto.verify compares in constant time.
  if (!/^[0-9a-f]{128}$/i.test(signature)) return { ok: false, message: 'the fal webhook signature is not 64 bytes of hex' };
  const message = signedMessage(requestId, userId, timestamp, body);
  const bytes = Buffer.from(signature, 'hex');
  if (!keys.some((key) => verify(null, message, key, bytes))) return { ok: false, message: 'the fal webhook signature does not match any configured key' };
  return { ok: true, requestId };
}

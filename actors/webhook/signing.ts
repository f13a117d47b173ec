import { randomBytes } from 'node:crypto';
import type { SignatureScheme } from '../../persistence/stores/webhooks/rows.ts';
import { signPayload } from './signature.ts';
import { standardSignature } from './standard-signature.ts';

export const SIGNATURE_SCHEMES = ['x-service', 'standard'] as const satisfies readonly SignatureScheme[];

/**
 * A new signing secret in the form its scheme's verifiers expect: `whsec_` and 43 base64url characters for
 * X-Service (the whole string is the HMAC key), `whsec_` and the standard base64 of 32 random bytes for
 * Standard Webhooks (the decoded bytes are the key, as its libraries decode them).
 */
export function newEndpointSecret(scheme: SignatureScheme): string {
  const bytes = randomBytes(32);
  return `whsec_${scheme === 'standard' ? bytes.toString('base64') : bytes.toString('base64url')}`;
}

/** The secrets an endpoint signs with now: its current one, and the one a rotation replaced while its overlap lasts. */
export interface SigningKeys {
  scheme: SignatureScheme;
  secret: string;
  previousSecret?: string | undefined;
  previousSecretExpiresAt?: Date | null;
}

/** The secrets that sign at `now` (ms): the current one first, then the previous one if its overlap has not ended. */
export function secretsAt(keys: SigningKeys, now: number): string[] {
  const live = keys.previousSecret !== undefined && keys.previousSecretExpiresAt != null && keys.previousSecretExpiresAt.getTime() > now;
  return live ? [keys.secret, keys.previousSecret!] : [keys.secret];
}

/**
 * The signature headers of one delivery, signed with every live secret:
 * - `x-service`: `X-Service-Signature: t=<unix>,v1=<hex>[,v1=<hex>]` (Stripe's layout, one v1 per secret);
 * - `standard`: `webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64>[ v1,<base64>]`.
 */
export function signatureHeaders(keys: SigningKeys, deliveryId: string, rawBody: string | Buffer, at: number): Record<string, string> {
  const unixSeconds = Math.floor(at / 1000);
  const secrets = secretsAt(keys, at);
  if (keys.scheme === 'standard') {
    return {
      'webhook-id': deliveryId,
      'webhook-timestamp': String(unixSeconds),
      'webhook-signature': secrets.map((secret) => `v1,${standardSignature(secret, deliveryId, unixSeconds, rawBody)}`).join(' '),
    };
  }
  return { 'x-service-signature': `t=${unixSeconds},${secrets.map((secret) => `v1=${signPayload(secret, rawBody, unixSeconds)}`).join(',')}` };
}

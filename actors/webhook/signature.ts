import { createHmac } from 'node:crypto';

/**
 * The X-Service-Signature header (docs/webhooks.md, Verifying a delivery): `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.rawBody">`
 * with the endpoint's signing secret, the same scheme as Stripe's (whose header has `v1` as well).
 */
export function signatureHeader(secret: string, rawBody: string | Buffer, unixSeconds: number): string {
  return `t=${unixSeconds},v1=${signPayload(secret, rawBody, unixSeconds)}`;
}

export function signPayload(secret: string, rawBody: string | Buffer, unixSeconds: number): string {
  return createHmac('sha256', secret).update(`${unixSeconds}.`).update(rawBody).digest('hex');
}

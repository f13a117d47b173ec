import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Standard Webhooks' signature check, as Replicate signs its webhooks
 * (https://replicate.com/docs/topics/webhooks/verify-webhook, https://www.standardwebhooks.com):
 * the key is the base64 after `whsec_`; the signed content is `${webhook-id}.${webhook-timestamp}.${body}`;
 * `webhook-signature` holds one or more space-separated `v1,<base64 HMAC-SHA256>`, any of which may match.
 */
export const SIGNATURE_TOLERANCE_MS = 5 * 60 * 1000;

export type SignatureVerdict = { ok: true; id: string } | { ok: false; message: string };

export function verifyStandardWebhook(secret: string, headers: Record<string, string | undefined>, body: Buffer, now: number): SignatureVerdict {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (!id || !timestamp || !signatures) return { ok: false, message: 'webhook-id, webhook-timestamp and webhook-signature are required' };
  if (!/^\d{1,12}$/.test(timestamp)) return { ok: false, message: 'webhook-timestamp is not a number of seconds' };
  if (Math.abs(now - Number(timestamp) * 1000) > SIGNATURE_TOLERANCE_MS)
    return { ok: false, message: 'webhook-timestamp is more than 5 minutes away from now' };

  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
  for (const candidate of signatures.split(' ')) {
    const comma = candidate.indexOf(',');
    if (comma < 0 || candidate.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(candidate.slice(comma + 1), 'base64');
    if (given.length === expected.length && timingSafeEqual(given, expected)) return { ok: true, id };
  }
  return { ok: false, message: 'no webhook-signature matches' };
}

import { createHmac } from 'node:crypto';

/**
 * The signature of the Standard Webhooks specification (standardwebhooks.com): base64 of HMAC-SHA256, keyed
 * with the bytes the secret's base64 after `whsec_` stands for, of "<webhook-id>.<webhook-timestamp>.<raw body>".
 */
export function standardSignature(secret: string, messageId: string, unixSeconds: number, rawBody: string | Buffer): string {
  return createHmac('sha256', standardKey(secret)).update(`${messageId}.${unixSeconds}.`).update(rawBody).digest('base64');
}

/** The HMAC key of a `whsec_<base64>` secret: the decoded bytes (a secret made for the X-Service scheme decodes too). */
export function standardKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
}

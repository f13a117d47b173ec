import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { InboundEvent, VerifiedEvent } from '../adapter.ts';

/**
 * Cog's webhooks carry no signature (crates/coglet/src/webhook.rs posts the prediction's state as JSON, with
 * at most a fixed `Authorization: Bearer $WEBHOOK_AUTH_TOKEN` for the whole container). So each job's webhook
 * URL carries its own token, HMAC-SHA256(COG_WEBHOOK_SECRET, generationId) in hex: a URL seen for one job
 * cannot be used to post events about another, and any node can check it from configuration alone.
 */
export function jobToken(secret: string, predictionId: string): string {
  return createHmac('sha256', secret).update(predictionId).digest('hex');
}

export function webhookUrl(eventsUrl: string, secret: string, predictionId: string): string {
  const url = new URL(eventsUrl);
  url.searchParams.set('job', predictionId);
  url.searchParams.set('token', jobToken(secret, predictionId));
  return url.toString();
}

export function verifyCogEvent(event: InboundEvent, secret: string, authToken?: string): VerifiedEvent {
  const job = event.query.job;
  const token = event.query.token;
  if (!job || !token) return { ok: false, message: 'The Cog event has no job or token in its query.' };
  if (!sameSecret(token, jobToken(secret, job))) return { ok: false, message: "The Cog event's token is wrong." };
  if (authToken !== undefined && !sameSecret(event.headers.authorization ?? '', `Bearer ${authToken}`)) {
    return { ok: false, message: "The Cog event's Authorization header is missing or wrong." };
  }
  let payload: unknown;
  try {
    payload = JSON.parse(event.body.toString('utf8'));
  } catch {
    return { ok: false, message: "The Cog event's body is not JSON." };
  }
  const prediction = payload as { id?: unknown; status?: unknown };
  if (typeof payload !== 'object' || payload === null || typeof prediction.status !== 'string') {
    return { ok: false, message: "The Cog event's body is not a prediction." };
  }
  // The token vouches for the job in the query; a body about another prediction is refused.
  if (prediction.id !== job) return { ok: false, message: "The Cog event's prediction id does not match its job." };
  // Cog sends no event id: the same state posted twice (a retried terminal webhook) gets the same one.
  const digest = createHash('sha256').update(event.body).digest('hex').slice(0, 32);
  return { ok: true, providerJobId: job, eventId: `${job}:${prediction.status}:${digest}`, payload };
}

/** Constant-time equality of two strings of any length (both hashed first, so lengths do not leak either). */
function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b) && given.length === expected.length;
}

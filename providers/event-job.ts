import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Our generation id in the URL a provider posts a job's events to, with a token only this service can make:
 * HMAC-SHA256 of the id under a key derived (SHA-256) from `secret` and a label of the provider. An event of
 * a job whose submission's answer was lost (a restart before its provider job id was written) then names
 * the job it belongs to, which adopts it instead of a second submission (docs/providers/fal.md, replicate.md).
 */
export function eventJobToken(label: string, secret: string, generationId: string): string {
  const key = createHash('sha256').update(`${label}:${secret}`).digest();
  return createHmac('sha256', key).update(generationId).digest('hex');
}

export function eventJobUrl(eventsUrl: string, label: string, secret: string, generationId: string): string {
  const url = new URL(eventsUrl);
  url.searchParams.set('job', generationId);
  url.searchParams.set('token', eventJobToken(label, secret, generationId));
  return url.toString();
}

/** The job an event's query names: its id when the token is right, `wrong` when it is not, undefined when absent. */
export function eventJobOf(query: Record<string, string | undefined>, label: string, secret: string): string | 'wrong' | undefined {
  const job = query.job;
  const token = query.token;
  if (job === undefined && token === undefined) return undefined;
  if (!job || !token || !/^[A-Za-z0-9_-]{1,128}$/.test(job)) return 'wrong';
  // Both sides hashed first, so neither their lengths nor their contents leak through the comparison's time.
  const a = createHash('sha256').update(token).digest();
  const b = createHash('sha256')
    .update(eventJobToken(label, secret, job))
    .digest();
  return timingSafeEqual(a, b) && token.length === 64 ? job : 'wrong';
}

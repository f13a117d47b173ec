import { eventJobOf, eventJobToken, eventJobUrl } from '../event-job.ts';

/**
 * Our generation id in the `fal_webhook` URL of a submission, with its token (../event-job.ts) keyed from
 * FAL_KEY: fal posts the end of a request to that URL, so the end of a request whose submission's answer was
 * lost names the job it belongs to (docs/providers/fal.md, "The submission window").
 */
const LABEL = 'fal-job-token';

export const falJobToken = (falKey: string, generationId: string) => eventJobToken(LABEL, falKey, generationId);
export const falWebhookUrl = (eventsUrl: string, falKey: string, generationId: string) => eventJobUrl(eventsUrl, LABEL, falKey, generationId);
export const falJobOf = (query: Record<string, string | undefined>, falKey: string) => eventJobOf(query, LABEL, falKey);

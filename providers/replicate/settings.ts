/**
 * The Replicate kind's settings, read from the environment once at start-up. The kind is configured when
 * REPLICATE_API_TOKEN or REPLICATE_BASE_URL is set; every malformed or missing value is one problem line
 * naming the variable (the service stops listing them). No problem line ever holds a secret's value.
 */
export interface ReplicateSettings {
  apiToken: string;
  /** e.g. https://api.replicate.com/v1, without a trailing slash. */
  baseUrl: string;
  /** Standard Webhooks signing secret (`whsec_<base64>`); without it no webhook is asked for and events are refused. */
  webhookSecret?: string;
  maxConcurrentJobs?: number;
  /** REPLICATE_RESUBMIT_GRACE_MS when set; else REPLICATE_RESUBMIT_GRACE_MS (the constant). */
  resubmitGraceMs?: number;
}

/**
 * A job handed over again after a restart waits this long for an event of a prediction Replicate may already
 * have made for it (with webhooks; Replicate posts `start` as a prediction starts) before it is created again.
 */
export const REPLICATE_RESUBMIT_GRACE_MS = 60_000;

export const REPLICATE_DEFAULT_BASE_URL = 'https://api.replicate.com/v1';

export function parseReplicateSettings(env: Record<string, string | undefined>): { settings: ReplicateSettings | undefined; problems: string[] } {
  const problems: string[] = [];
  const token = env.REPLICATE_API_TOKEN?.trim() || undefined;
  const baseUrlSet = env.REPLICATE_BASE_URL?.trim() || undefined;
  if (token === undefined && baseUrlSet === undefined) return { settings: undefined, problems };

  if (token === undefined) problems.push('REPLICATE_API_TOKEN: required when REPLICATE_BASE_URL is set');
  else if (/\s/.test(token)) problems.push('REPLICATE_API_TOKEN: must not contain whitespace');

  const baseUrl = (baseUrlSet ?? REPLICATE_DEFAULT_BASE_URL).replace(/\/+$/, '');
  if (!isHttpUrl(baseUrl)) problems.push(`REPLICATE_BASE_URL=${JSON.stringify(baseUrlSet)}: expected an http(s) URL such as ${REPLICATE_DEFAULT_BASE_URL}`);

  const webhookSecret = env.REPLICATE_WEBHOOK_SECRET?.trim() || undefined;
  if (webhookSecret !== undefined && !isWebhookSecret(webhookSecret)) {
    problems.push('REPLICATE_WEBHOOK_SECRET: expected whsec_ followed by the base64 key GET /v1/webhooks/default/secret answers');
  }

  let maxConcurrentJobs: number | undefined;
  const concurrency = env.REPLICATE_MAX_CONCURRENT_JOBS?.trim();
  if (concurrency) {
    if (/^[1-9]\d{0,5}$/.test(concurrency)) maxConcurrentJobs = Number(concurrency);
    else problems.push(`REPLICATE_MAX_CONCURRENT_JOBS=${JSON.stringify(concurrency)}: expected a whole number from 1 to 999999`);
  }

  let resubmitGraceMs: number | undefined;
  const grace = env.REPLICATE_RESUBMIT_GRACE_MS?.trim();
  if (grace) {
    if (/^\d{1,7}$/.test(grace) && Number(grace) <= 3_600_000) resubmitGraceMs = Number(grace);
    else problems.push(`REPLICATE_RESUBMIT_GRACE_MS=${JSON.stringify(grace)}: expected a whole number of milliseconds up to 3600000`);
  }

  if (problems.length > 0) return { settings: undefined, problems };
  return {
    settings: { apiToken: token!, baseUrl, webhookSecret, maxConcurrentJobs, ...(resubmitGraceMs !== undefined ? { resubmitGraceMs } : {}) },
    problems,
  };
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === '';
  } catch {
    return false;
  }
}

/** `whsec_` and a base64 key of at least 16 bytes (Standard Webhooks' secrets are 24 to 64). */
export function isWebhookSecret(secret: string): boolean {
  const match = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret);
  return match !== null && Buffer.from(match[1]!, 'base64').length >= 16;
}

/**
 * The Cog kind's settings, from the environment. A Cog container has no API key: the kind is configured
 * when COG_BASE_URL names the container; its webhooks are then authenticated by a per-job token derived
 * from COG_WEBHOOK_SECRET (webhook.ts), which every node must share.
 */
export interface CogSettings {
  /** The container's base URL (e.g. http://cog-flux:5000); a deployment's target may name another one. */
  baseUrl: string;
  /** The HMAC key of the per-job webhook token; at least 32 characters. */
  webhookSecret: string;
  /** The container's WEBHOOK_AUTH_TOKEN, when set there: its webhooks then carry `Authorization: Bearer <token>`. */
  webhookAuthToken?: string;
  /** Prediction slots of the container (Cog runs one at a time unless the model says `@cog.concurrent(max=N)`). */
  maxConcurrentJobs: number;
  /** First wait after a 409 (all slots busy) or a 503 (setup not finished); doubled up to 30 s, never past the deadline. */
  busyRetryMs: number;
}

const MIN_SECRET_LENGTH = 32;

export function parseCogSettings(env: Record<string, string | undefined>): { settings: CogSettings | undefined; problems: string[] } {
  const problems: string[] = [];
  const baseUrl = env.COG_BASE_URL?.trim();
  if (!baseUrl) return { settings: undefined, problems };

  if (!isHttpUrl(baseUrl)) problems.push('COG_BASE_URL must be an http or https URL without credentials');
  const webhookSecret = env.COG_WEBHOOK_SECRET ?? '';
  if (!webhookSecret) problems.push("COG_WEBHOOK_SECRET is required when COG_BASE_URL is set (it signs each job's webhook URL)");
  else if (webhookSecret.length < MIN_SECRET_LENGTH) problems.push(`COG_WEBHOOK_SECRET must be at least ${MIN_SECRET_LENGTH} characters long`);
  const webhookAuthToken = env.COG_WEBHOOK_AUTH_TOKEN || undefined;
  const maxConcurrentJobs = positiveInteger(env, 'COG_MAX_CONCURRENT_JOBS', 1, problems);
  const busyRetryMs = positiveInteger(env, 'COG_BUSY_RETRY_MS', 1_000, problems);

  if (problems.length > 0) return { settings: undefined, problems };
  return {
    settings: { baseUrl: baseUrl.replace(/\/+$/, ''), webhookSecret, ...(webhookAuthToken ? { webhookAuthToken } : {}), maxConcurrentJobs, busyRetryMs },
    problems,
  };
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === '';
  } catch {
    return false;
  }
}

function positiveInteger(env: Record<string, string | undefined>, name: string, fallback: number, problems: string[]): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || !Number.isSafeInteger(Number(raw))) {
    problems.push(`${name} must be a positive integer (got "${raw.slice(0, 40)}")`);
    return fallback;
  }
  return Number(raw);
}

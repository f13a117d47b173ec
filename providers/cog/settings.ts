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
  /**
   * How long Cog keeps trying to post a prediction's end (crates/coglet/src/webhook.rs: 12 retries after the
   * first try, 100 ms × 2^min(n, 10) apart, 409.4 s in all, each try bounded by 30 s): silence this long means
   * no end is on its way, so only then may a PUT ask Cog (a PUT of an ended id runs it again). Default 420 000.
   */
  webhookRetryWindowMs: number;
  /**
   * The longest wait between two of those tries (102.4 s) and one try's time-out (30 s): a service that comes
   * back gets an end Cog was still retrying within this time. A resumed job waits this long before asking. Default 135 000.
   */
  webhookRetryGapMs: number;
}

const MIN_SECRET_LENGTH = 32;
/** Cog's retries of a prediction's end: 409.4 s of waits (0.2 s doubling to 102.4 s, then 102.4 s twice more), and a margin. */
export const COG_WEBHOOK_RETRY_WINDOW_MS = 420_000;
/** Cog's longest wait between two tries of an end (102.4 s) and the time-out of one try (30 s), and a margin. */
export const COG_WEBHOOK_RETRY_GAP_MS = 135_000;

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
  const webhookRetryWindowMs = positiveInteger(env, 'COG_WEBHOOK_RETRY_WINDOW_MS', COG_WEBHOOK_RETRY_WINDOW_MS, problems);
  const webhookRetryGapMs = positiveInteger(env, 'COG_WEBHOOK_RETRY_GAP_MS', COG_WEBHOOK_RETRY_GAP_MS, problems);

  if (problems.length > 0) return { settings: undefined, problems };
  return {
    settings: {
      baseUrl: baseUrl.replace(/\/+$/, ''),
      webhookSecret,
      ...(webhookAuthToken ? { webhookAuthToken } : {}),
      maxConcurrentJobs,
      busyRetryMs,
      webhookRetryWindowMs,
      webhookRetryGapMs,
    },
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

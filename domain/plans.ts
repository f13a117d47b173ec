/** The plans a workspace can be on, and what each allows; data, so billing and limits read one table. */
export const PLAN_IDS = ['free', 'pro', 'team'] as const;
export type PlanId = (typeof PLAN_IDS)[number];

/** Requests per minute per API key, by the plan of the key's workspace (DECISIONS.md "Rate limits"). */
export const DEFAULT_REQUESTS_PER_MINUTE: Readonly<Record<PlanId, number>> = { free: 60, pro: 600, team: 3000 };

/** The env variable that overrides each plan's per-key limit. */
export const REQUESTS_PER_MINUTE_ENV: Readonly<Record<PlanId, string>> = { free: 'RATE_LIMIT_FREE', pro: 'RATE_LIMIT_PRO', team: 'RATE_LIMIT_TEAM' };

export function isPlanId(value: string): value is PlanId {
  return (PLAN_IDS as readonly string[]).includes(value);
}

/** The per-key limit for a workspace's plan; an unknown plan gets the free plan's limit. */
export function requestsPerMinute(limits: Readonly<Record<PlanId, number>>, plan: string): number {
  return isPlanId(plan) ? limits[plan] : limits.free;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** What a plan costs and allows. Which models it may use is in the model catalog (each model lists its plans). */
export interface PlanEntitlements {
  id: PlanId;
  name: string;
  /** Subscription price per month, in US cents. */
  monthlyPriceCents: number;
  /** Credits granted at the start of every period. */
  monthlyCredits: number;
  /** What one credit costs when a job is paid from the pay-as-you-go wallet, in US cents. */
  centsPerCredit: number;
  /** Jobs of the workspace past `queued` (reserved, submitted or running) at one time. */
  concurrentJobs: number;
  /** Bytes of assets (uploads and outputs) the workspace may keep. */
  storageBytes: number;
  /** Largest single upload. */
  maxFileBytes: number;
}

export const PLANS: Readonly<Record<PlanId, PlanEntitlements>> = {
  free: { id: 'free', name: 'Free', monthlyPriceCents: 0, monthlyCredits: 100, centsPerCredit: 5, concurrentJobs: 2, storageBytes: 1 * GiB, maxFileBytes: 25 * MiB },
  pro: { id: 'pro', name: 'Pro', monthlyPriceCents: 2_900, monthlyCredits: 3_000, centsPerCredit: 4, concurrentJobs: 10, storageBytes: 50 * GiB, maxFileBytes: 200 * MiB },
  team: { id: 'team', name: 'Team', monthlyPriceCents: 9_900, monthlyCredits: 12_000, centsPerCredit: 3, concurrentJobs: 50, storageBytes: 500 * GiB, maxFileBytes: 1 * GiB },
};

/** The entitlements of a workspace's plan; an unknown plan id gets the free plan's. */
export function planOf(plan: string): PlanEntitlements {
  return isPlanId(plan) ? PLANS[plan] : PLANS.free;
}

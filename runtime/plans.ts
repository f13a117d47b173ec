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

/**
 * What a plan costs and allows. The plans themselves are the operator's, in the catalog file
 * (domain/catalog/file-schema.ts); which models a plan may use is said by each model.
 */
export type PlanId = string;

export interface PlanEntitlements {
  id: PlanId;
  name: string;
  /** Subscription price per month, in US cents (0: no subscription; the default plan usually). */
  monthlyPriceCents: number;
  /** Credits granted at the start of every period. */
  monthlyCredits: number;
  /** What one credit costs when a job is paid from the pay-as-you-go wallet, in US cents. */
  centsPerCredit: number;
  /** Jobs of the workspace past `queued` (reserved, submitted or running) at one time. */
  concurrentJobs: number;
  /** Jobs of the workspace not finished (queued or active) at one time. */
  unfinishedJobs: number;
  /** Bytes of assets (uploads and outputs) the workspace may keep. */
  storageBytes: number;
  /** Largest single upload. */
  maxFileBytes: number;
  /** What the plan's workspaces may upload (generation outputs are not limited by it). */
  uploadMediaTypes: ReadonlyArray<'image' | 'video' | 'audio'>;
  /** Requests per minute per API key. */
  requestsPerMinute: number;
  /** Share of a busy deployment against other plans' workspaces. */
  fairShareWeight: number;
}

/** A workspace may hold this many times its plan's concurrency in unfinished jobs unless its plan says otherwise. */
export const QUEUE_FACTOR = 10;

/** The env variables that, when set, override a plan's per-key limit (kept from before plans were data). */
export const REQUESTS_PER_MINUTE_ENV: Readonly<Record<string, string>> = { free: 'RATE_LIMIT_FREE', pro: 'RATE_LIMIT_PRO', team: 'RATE_LIMIT_TEAM' };

/** The plans a workspace can be on, looked up by id: an unknown id (a plan removed from the catalog) gets the default plan's entitlements. */
export interface PlanBook {
  plan(id: string): PlanEntitlements;
  hasPlan(id: string): boolean;
  plans(): PlanEntitlements[];
  /** The plan new workspaces start on and cancelled subscriptions return to. */
  defaultPlan(): PlanEntitlements;
}

/** A workspace actor's decided state, for the deciders' tests (test/actors/workspace-decide*.test.ts): no database, no server. */
import { emptyAccount, grant, type Account } from '../../domain/account.ts';
import type { PlanEntitlements } from '../../domain/plans.ts';
import { IdempotencyCache } from '../../actors/workspace/idempotency-cache.ts';
import { WorkspaceJobs } from '../../actors/workspace/jobs.ts';
import type { WorkspaceState } from '../../actors/workspace/state.ts';

export const NOW = Date.UTC(2026, 0, 2, 12, 0, 0);
export const TIMEOUT = 600_000;
export const WS = 'ws_1';

export function planOf(patch: Partial<PlanEntitlements> = {}): PlanEntitlements {
  return {
    id: 'pro',
    name: 'Pro',
    monthlyPriceCents: 2_000,
    monthlyCredits: 1_000,
    centsPerCredit: 2,
    concurrentJobs: 2,
    unfinishedJobs: 20,
    storageBytes: 1_000_000,
    maxFileBytes: 1_000,
    uploadMediaTypes: ['image'],
    requestsPerMinute: 60,
    fairShareWeight: 3,
    ...patch,
  };
}

export function funded(credits: number): Account {
  if (credits === 0) return emptyAccount();
  const granted = grant(emptyAccount(), credits, 'plan:pro:opening');
  if (!granted.ok) throw new Error('grant refused');
  return granted.account;
}

export function stateOf(patch: Partial<WorkspaceState> = {}): WorkspaceState {
  return {
    workspaceId: WS,
    plan: planOf(),
    account: funded(100),
    jobs: new WorkspaceJobs(),
    expiryAt: undefined,
    idempotency: new IdempotencyCache(),
    wallet: { autoRecharge: { enabled: false, thresholdCents: 0, amountCents: 0 }, monthlySpendCapCents: null },
    spend: { month: '2026-01', spentCents: 0 },
    recharging: false,
    keys: new Map(),
    ...patch,
  };
}

import type { PlanEntitlements } from '../../domain/plans.ts';
import type { Timer } from '../../runtime/clock.ts';
import type { Account, MonthlySpend, WalletSettings } from '../../domain/account.ts';
import type { IdempotencyCache } from './idempotency-cache.ts';
import type { KeySpend } from '../../domain/key-limits.ts';
import type { WorkspaceJobs } from './jobs.ts';

/** What the workspace actor holds in memory between messages, as its deciders (decide-*.ts) read and change it. */
export interface WorkspaceState {
  workspaceId: string;
  plan: PlanEntitlements;
  account: Account;
  /** Its unfinished jobs, one entry each, oldest first (actors/workspace/jobs.ts). */
  jobs: WorkspaceJobs;
  /** When the workspace's one queue timer fires: the earliest deadline of its queued jobs (or one passed since). */
  expiryAt: number | undefined;
  /** Idempotency-Keys of creates in flight, and the most recently used completed ones. */
  idempotency: IdempotencyCache;
  wallet: WalletSettings;
  /** Wallet money spent this UTC month, for the monthly spend cap. */
  spend: MonthlySpend;
  /** An automatic deposit is on its way. */
  recharging: boolean;
  /**
   * The limits and spend of each API key this actor has seen since it loaded: those of its unfinished jobs,
   * loaded with it, and any other on its first create. Never dropped while the actor lives, so every change
   * of a key's spend passes through here.
   */
  keys: Map<string, KeySpend>;
}

/**
 * The actor's state: the decided state, and the handles its interpreter (actor.ts, `perform`) keeps beside it,
 * which no decider sees.
 */
export interface WorkspaceActorState extends WorkspaceState {
  /** The timer armed for `expiryAt`. */
  expiryTimer: Timer | undefined;
  /**
   * The queue position (BulkWrite) of this workspace's last settlement: a job reserved in its creation's
   * transaction that may hold the slot a settlement not yet committed freed (a `settling` job) is queued behind it.
   */
  lastSettlement: number;
}

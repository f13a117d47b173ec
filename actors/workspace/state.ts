import type { PlanEntitlements } from '../../domain/plans.ts';
import type { Timer } from '../../runtime/clock.ts';
import type { GenerationRow } from '../../persistence/entities/generation.ts';
import type { Account, MonthlySpend, WalletSettings } from './account.ts';
import type { IdempotencyCache } from './idempotency-cache.ts';
import type { KeyJob, KeySpend } from './key-limits.ts';
import type { JobContext } from '../../runtime/tracing.ts';

/** What the workspace actor holds in memory between messages. */
export interface WorkspaceState {
  workspaceId: string;
  plan: PlanEntitlements;
  account: Account;
  /** Jobs past queued that hold one of the plan's concurrency slots. */
  active: Set<string>;
  /** Committed queued jobs, oldest first. */
  queue: string[];
  /** Active jobs recovered after a restart while generation was paused: not yet handed to their provider again. */
  heldRecovered: Set<string>;
  /**
   * The queue deadline of each queued job not yet granted a slot nor told to expire. The workspace keeps
   * one timer for the earliest (expiryTimer), so a queued job needs no live actor of its own.
   */
  deadlineOf: Map<string, number>;
  expiryTimer: Timer | undefined;
  expiryAt: number | undefined;
  /**
   * The rows of the jobs created by this actor and still queued, handed to their generation actor when
   * they start, so it need not read its row back. At most the plan's unfinished jobs (QUEUE_FACTOR × its
   * concurrency); jobs queued before a restart have none here, and their actor loads its row.
   */
  fresh: Map<string, GenerationRow>;
  /** Whose slots each job queued or active takes (its deployment's or its provider kind's: ActorDeps.slotKeyOf). */
  providerOf: Map<string, string>;
  /**
   * The trace context and request id of each queued job's creating request (kept with the job, and read
   * back after a restart): the job starts in that trace, not in the one of whatever freed its slot.
   */
  traceOf: Map<string, JobContext>;
  /** Creations accepted but not yet committed. */
  creating: number;
  /** Of those, the ones whose job will queue (not reserved at creation): a later create may not start before them. */
  creatingQueued: number;
  /**
   * The queue position (BulkWrite) of this workspace's last settlement: a job reserved in its creation's
   * transaction that may hold the slot a settlement freed is queued behind it (see freesInFlight).
   */
  lastSettlement: number;
  /**
   * Slots freed in memory by settlements not yet committed: a job reserved at creation waits behind the last
   * settlement only when, counting these as still taken, the workspace would hold more jobs than its plan allows.
   */
  freesInFlight: number;
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
  /** What each unfinished job of a key counted against it. */
  keyJobs: Map<string, KeyJob>;
}

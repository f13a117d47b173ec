/**
 * What the workspace actor's deciders (decide-*.ts) take and give: the facts looked up before deciding, the
 * providers' slots, and the decision, its effects as data. The actor's interpreter (perform.ts) does what an
 * effect says; a decider does nothing but change the state it is handed and say what to do.
 */
import type { PlanEntitlements } from '../../domain/plans.ts';
import type { KeyLimits } from '../../domain/key-limits.ts';
import type { LedgerEntry, WalletSettings } from '../../domain/account.ts';
import type { SavedCardPayment } from '../../persistence/stores/payment-outcomes.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import type { JobContext } from '../../runtime/tracing.ts';
import type { GenerationMessage } from '../generation/protocol.ts';
import type { Progress } from '../generation/progress-writes.ts';
import type { Creation } from './creations.ts';
import type { Settlement } from './settlements.ts';
import type { RechargeCharge, RenewalCharge, WorkspaceMessage } from './protocol.ts';
import type { WorkspaceState } from './state.ts';

/**
 * The providers' slots, shared by the workspaces of the node (actors/generation/provider-capacity.ts): the one
 * input of a decider that is not data. Its answers depend on the calls before them in the same decision (a
 * slot a settlement releases may be granted at once to this workspace's oldest ask, which `tryAcquire` then
 * takes), so they cannot be asked beforehand and passed in. It is synchronous and in memory; a grant to
 * another workspace tells that workspace to schedule, through its mailbox.
 */
export interface SlotPort {
  /** Takes a slot for a job being created only if one is free and no workspace waits for it. */
  acquireIfFree(slotKey: string, generationId: string, workspaceId: string, weight: number): boolean;
  /** Takes a slot for a queued job, or queues the workspace's ask for the next one in fair order. */
  tryAcquire(slotKey: string, generationId: string, workspaceId: string, weight: number): boolean;
  /** Gives the job's slot (or its ask) back. */
  release(generationId: string): void;
}

/** What the actor reads of the service before deciding a message that may start jobs: plain values, read once. */
export interface WorkspaceFacts {
  /** The workspace's plan as the catalog serves it now (a reload may have changed its limits). */
  plan: PlanEntitlements;
  /** The operator's emergency stop: queued jobs wait. */
  paused: boolean;
  /** Cluster mode: the workspace's shard is being handed over; its queued jobs wait for the next owner. */
  handingOver: boolean;
}

/** Effects that write nothing: performed in their turn, or as a write's follow-ups once it committed (or failed). */
export type FollowUp =
  /** A message to this workspace's own mailbox (a commit's outcome, a schedule, an auto-recharge to start). */
  | { type: 'tell_self'; msg: WorkspaceMessage }
  /** A message to a generation's actor. */
  | { type: 'tell_generation'; id: string; msg: GenerationMessage }
  /**
   * A job let go towards its provider (`start`, or `reserve` for a queued one): told in the trace and request of
   * the request that created it, not in those of whatever freed its slot (none: outside every trace).
   */
  | { type: 'start_generation'; id: string; msg: Extract<GenerationMessage, { type: 'start' | 'reserve' }>; trace: JobContext | undefined }
  /** The live streams see the job's row (it committed). */
  | { type: 'publish'; row: GenerationRow }
  /** The metrics count a job's transition. */
  | { type: 'count_transition'; from: string; to: string }
  /** Budget alerts look at the workspace's committed money again. */
  | { type: 'money_moved' }
  /** The workspace's plan changed and committed: cached key records (which carry its rate limit) are dropped. */
  | { type: 'plan_changed' }
  /** The renewal scheduler looks at the subscription again at `at`. */
  | { type: 'schedule_renewal'; subscriptionId: string; at: number }
  | { type: 'log'; level: 'warn' | 'error'; fields: Record<string, unknown>; message: string };

/** What the actor does, as data. Every kind here is performed by perform.ts (`perform`). */
export type WorkspaceEffect =
  | FollowUp
  /**
   * A create's rows (generation, reservation, key spend, Idempotency-Key) to the group commit: with the other
   * creates (`creations`), or, reserved at creation in a slot a settlement not yet committed freed, behind the
   * workspace's last settlement (`behind_last_settlement`). `onCommitted` once the row is durable, `onFailed`
   * when the write failed (the actor then reloads its state from the database).
   */
  | { type: 'write_creation'; creation: Creation; lane: 'creations' | 'behind_last_settlement'; onCommitted: FollowUp[]; onFailed?: FollowUp[] }
  /**
   * A job's end (terminal row, capture or release, key spend, rollups, outputs, event) to the group commit,
   * behind the job's progress writes: `progress`, its transitions not written yet, goes just before it in the
   * same commit; without it, it goes behind those still to commit. Becomes the workspace's last settlement.
   */
  | { type: 'write_settlement'; settlement: Settlement; progress: Progress | undefined; onCommitted: FollowUp[] }
  /** A key's new spending controls to its row. */
  | { type: 'write_key_limits'; keyId: string; limits: KeyLimits; at: number }
  /** The workspace's one queue timer, (re)armed to fire `expire_queued` at `at` (ms on the clock). */
  | { type: 'arm_expiry'; at: number }
  | { type: 'cancel_expiry' }
  /**
   * A payment's outcome in one transaction of its own, awaited in the mailbox (the effects after it, and the
   * next message, wait for its commit), so that what the decision read from the database (a payment still
   * pending, an event not seen) stays true until it has written: `statements` in order, then the ledger's
   * `money`, and the wallet activated when the money activates it.
   */
  | { type: 'commit'; statements: PaymentStatement[]; money?: { entries: LedgerEntry[]; at: Date; activatesWallet: boolean } }
  /** The saved card charged beside the mailbox (pipeToSelf); its result comes back as `renewal_charged` or `recharge_charged`. */
  | { type: 'charge_saved_card'; purpose: 'renewal'; charge: RenewalCharge }
  | { type: 'charge_saved_card'; purpose: 'recharge'; charge: RechargeCharge }
  /** A charge for this purpose is under way on this node, or no longer (BillingDeps.charges: not forgotten by a reload). */
  | { type: 'charge_under_way'; key: string }
  | { type: 'charge_done'; key: string };

/** One statement of a payment's transaction, as data (persistence/stores/payment-outcomes.ts runs each). */
export type PaymentStatement =
  | { kind: 'record_billing_event'; id: string; provider: string; eventType: string; paymentId: string; applied: boolean; at: Date }
  | { kind: 'settle_payment'; paymentId: string; status: 'succeeded' | 'failed'; at: Date; failureReason?: string }
  | { kind: 'settle_order'; purpose: 'credit_top_up' | 'wallet_deposit'; orderId: string; status: 'paid' | 'failed'; at: Date }
  | { kind: 'start_subscription'; id: string; plan: string; periodEnd: Date; at: Date }
  | { kind: 'end_subscription'; id: string; status: 'canceled' | 'past_due'; endedAt: Date; fallbackPlan: string; at: Date }
  /**
   * The next period of an active subscription still at `periodEnd`: `ifAdvanced` once committed when it was,
   * `ifMoved` when it had moved meanwhile (the statement's answer chooses).
   */
  | { kind: 'advance_subscription'; id: string; periodEnd: Date; nextEnd: Date; at: Date; ifAdvanced: FollowUp[]; ifMoved: FollowUp[] }
  | { kind: 'insert_saved_card_payment'; payment: SavedCardPayment }
  | { kind: 'insert_auto_recharge_deposit'; id: string; amountCents: number; status: 'paid' | 'failed'; paymentId: string; at: Date }
  | { kind: 'disable_auto_recharge' }
  | { kind: 'write_wallet_settings'; settings: WalletSettings; at: Date };

/**
 * A decider's answer: the next state (the one it was handed, changed in place: the jobs, Idempotency-Keys and
 * keys' spend are the actor's own and change only in its mailbox, and copying them per message would cost every
 * create an allocation per job), the reply, and the effects in the order they are performed. The reply is given
 * once every write among the effects committed, at once when there is none; `afterWrites` is performed once
 * every write ended, committed or not.
 */
export interface Decision<S extends WorkspaceState, R> {
  state: S;
  reply: R;
  effects: WorkspaceEffect[];
  afterWrites?: FollowUp[];
}

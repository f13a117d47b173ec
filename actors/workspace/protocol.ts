import type { SubscriptionRow } from '../../persistence/stores/payment-outcomes.ts';
import type { TokenTerms } from '../../domain/catalog/pricing.ts';
import type { AnyReplyOf, NoReply, Protocol } from '../../runtime/actor-protocol.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import type { MonthlySpend, MoneyRefusal, PaymentMode, WalletSettings } from '../../domain/account.ts';
import type { ChargeResult, ProviderEvent } from '../billing/provider.ts';
import type { WorkspaceRecord } from '../../persistence/stores/workspace/load.ts';
import type { IdempotencyEntry } from './idempotency-cache.ts';
import type { KeyLimits, KeyLimitsPatch, KeyLimitsUsage } from '../../domain/key-limits.ts';
import type { Progress } from '../generation/progress-writes.ts';
import type { NewAsset } from '../../persistence/assets/store.ts';

/**
 * A generation as the HTTP layer asks for it, its model and params checked against the catalog and its inputs
 * against the workspace. The workspace actor prices it and chooses its deployment next to its reservation
 * (pricing.ts), then reserves and stores it.
 */
export interface GenerationOrder {
  /** An id the caller made (newId('gen')) to follow the job before it exists (the OpenAI-compatible door); made here otherwise. */
  id?: string;
  workspaceId: string;
  apiKeyId: string | null;
  userId: string | null;
  /** The mode the request named, which was its model's when checked. */
  mode: string;
  modelId: string;
  params: Record<string, unknown>;
  inputs: Record<string, unknown>;
  paymentMode: PaymentMode;
  project: string | null;
}

/** An order priced, against the catalog the actor serves when it reserves it: what it reserves and stores. */
export interface GenerationDraft extends GenerationOrder {
  provider: string;
  /** The catalog deployment that runs it, chosen at creation and kept. */
  deploymentId: string;
  /** A token-priced model's price at creation; null for the other units. */
  tokenTerms: TokenTerms | null;
  /** What is reserved: the whole price, or for a token-priced model the most the job can cost. */
  credits: number;
  /** The model's plans, so access is checked against the workspace's current plan. */
  modelPlans: string[];
}

/** The terminal write of a generation, committed in the same transaction as its capture or release. */
export interface GenerationSettlement {
  status: 'succeeded' | 'failed' | 'cancelled' | 'expired';
  completedAt: string;
  textOutput?: string;
  outputAssetIds: string[];
  errorCode?: string;
  errorMessage?: string;
  timeline: GenerationRow['timeline'];
  /** The rows of its output files (stored already), written in the same commit. */
  outputAssets?: NewAsset[];
  /** The terminal event, whose webhook deliveries commit with it (docs/webhooks.md, Deliveries). */
  event?: import('../webhook/enqueue.ts').SettledEvent;
  /**
   * What the usage rollups need of the generation, fixed at its creation: its key, its creation time and its
   * price (reserved credits), and a token-priced job's price terms. The workspace sets `credits` to what a
   * token-priced job was charged. Its model, mode and project place it in the usage series.
   */
  generation: Pick<GenerationRow, 'apiKeyId' | 'createdAt' | 'credits' | 'tokenTerms' | 'usage' | 'modelId' | 'mode' | 'project'>;
}

export type WorkspaceMessage =
  | { type: 'create'; order: GenerationOrder; idempotency?: { key: string; hash: string } }
  /** Several creates in one message (POST /v1/generations/batch): answered with one CreateReply per item, in order. */
  | { type: 'create_batch'; items: CreateItem[] }
  /** Written behind the generation's progress writes not yet committed (progress-writes.ts, pendingProgressOf). */
  | {
      type: 'settle';
      generationId: string;
      money: 'capture' | 'release';
      settlement: GenerationSettlement;
      /**
       * The job's transitions not written yet (its provider answers within its request: actors/generation/actor.ts,
       * RIDE_MS): written just before the settlement, in its group commit.
       */
      progress?: Progress;
    }
  | { type: 'slot_declined'; generationId: string }
  | { type: 'schedule' }
  /**
   * A job in flight at a restart, recovered while generation is paused: it keeps its slot and waits, and the
   * first schedule once the stop is lifted tells it to recover again (then it goes to its provider).
   */
  | { type: 'hold_recovered'; generationId: string }
  /** The workspace's queue timer fired: queued jobs past their deadline expire. */
  | { type: 'expire_queued' }
  | { type: 'balances' }
  /** Spawns the actor from a record read beside others' (a restart's recovery), answered like `balances`. */
  | { type: 'preloaded'; record: WorkspaceRecord }
  /** A verified payment-provider event about one of the workspace's payments; applied once. */
  | { type: 'payment_event'; provider: string; event: ProviderEvent }
  /** A subscription's period ended: renew it (charging the saved card) or end it. */
  | { type: 'renew'; subscriptionId: string }
  | { type: 'cancel_subscription' }
  | { type: 'wallet' }
  | { type: 'wallet_settings'; patch: WalletSettingsPatch }
  | { type: 'auto_recharge' }
  /** A saved card's charge for an auto-recharge came back (null: no answer, the charge threw). */
  | { type: 'recharge_charged'; charge: RechargeCharge; result: ChargeResult | null }
  /** A saved card's charge for a renewal came back (null: no answer, the charge threw, `error` says why). */
  | { type: 'renewal_charged'; charge: RenewalCharge; result: ChargeResult | null; error?: string }
  /** PATCH /v1/api-keys/:id: a change of one of the workspace's keys' spending controls; answered with the new limits. */
  | { type: 'key_limits'; keyId: string; patch: KeyLimitsPatch }
  /** GET /v1/api-keys/:id/usage: a key's limits and what it spent, as of now. */
  | { type: 'key_usage'; keyId: string }
  | WorkspaceCommitMessage;

/**
 * What the workspace actor tells itself when a write of its own commits or fails, so that the outcome changes
 * its state in its mailbox, one message at a time, as every other message does. A reply still waits for its
 * write (replyWhenDurable); these reach the mailbox before it is sent. A failed write needs no message of its
 * own for the state: the actor reloads it from the database before its next message.
 */
export type WorkspaceCommitMessage =
  /**
   * A job's row committed: a job that will queue joins the queue, one reserved at creation is active.
   * `idempotency`: its Idempotency-Key, remembered with its answer. `schedule`: a single create's (a batch schedules once, after all its rows).
   */
  | { type: 'create_committed'; generationId: string; idempotency?: { key: string; entry: IdempotencyEntry }; schedule: boolean }
  /** The row of a job reserved at creation failed: the provider's slot it took is given back, and the workspace's slot goes to the queue. */
  | { type: 'create_failed'; generationId: string }
  /** The settlement of a job that held a slot committed: a job reserved at creation need not wait behind it any more. */
  | { type: 'settle_committed'; generationId: string };

/** Each message's reply; NoReply for those only ever told. */
export type WorkspaceProtocol = Protocol<
  WorkspaceMessage,
  {
    create: CreateReply;
    create_batch: CreateReply[];
    settle: SettleReply;
    slot_declined: NoReply;
    schedule: NoReply;
    hold_recovered: NoReply;
    expire_queued: NoReply;
    balances: Balances;
    preloaded: Balances;
    payment_event: PaymentEventReply;
    renew: RenewReply;
    /** The subscription marked to end at its period's end; null when there is none. */
    cancel_subscription: SubscriptionRow | null;
    wallet: WalletSnapshot;
    wallet_settings: WalletSnapshot | { refused: string };
    auto_recharge: NoReply;
    recharge_charged: NoReply;
    renewal_charged: NoReply;
    key_limits: KeyLimitsReply;
    key_usage: KeyUsageReply;
    create_committed: NoReply;
    create_failed: NoReply;
    settle_committed: NoReply;
  }
>;

export type WorkspaceReply = AnyReplyOf<WorkspaceProtocol>;

/** What a workspace actor answers to a due renewal: when the subscription is next due, or null once it has ended. */
export interface RenewReply {
  nextAt: number | null;
}

export type { SubscriptionRow };

/**
 * A charge of the saved card for an automatic wallet deposit, as the workspace actor decided it: made
 * beside its mailbox, and told back with its result (actors/workspace/payments.ts).
 */
export interface RechargeCharge {
  paymentId: string;
  depositId: string;
  amountCents: number;
  description: string;
  at: number;
}

/** A charge of the saved card for a subscription's next period, as decided when its period ended. */
export interface RenewalCharge {
  paymentId: string;
  subscriptionId: string;
  plan: string;
  amountCents: number;
  description: string;
  /** The end of the period just over, and of the one the charge pays for. */
  periodEnd: number;
  nextEnd: number;
  at: number;
}

export type KeyLimitsReply = { found: true; limits: KeyLimits } | { found: false };
export type KeyUsageReply = { found: true; usage: KeyLimitsUsage } | { found: false };

/** A change of the wallet's settings; fields left out keep their value. */
export interface WalletSettingsPatch {
  autoRecharge?: Partial<WalletSettings['autoRecharge']>;
  monthlySpendCapCents?: number | null;
}

export interface PaymentEventReply {
  applied: boolean;
  /** Why nothing changed: a duplicate event, a payment no longer pending, an unknown payment. */
  reason?: string;
}

export interface WalletSnapshot {
  balanceCents: number;
  reservedCents: number;
  activated: boolean;
  settings: WalletSettings;
  monthlySpend: MonthlySpend;
  autoRechargeUnderWay: boolean;
}

/** One create of a batch: what a `create` message carries. */
export interface CreateItem {
  order: GenerationOrder;
  idempotency?: { key: string; hash: string };
}

export type CreateReply =
  | { kind: 'created'; generation: GenerationRow }
  | { kind: 'replay'; status: number; generation: GenerationRow }
  | { kind: 'refused'; code: MoneyRefusal | 'plan_limit_reached' | 'conflict' | 'validation_error'; message: string };

/** A settle, once committed: the webhook endpoints that got a delivery of its event, to wake. */
export interface SettleReply {
  settled: true;
  endpointIds: string[];
  /** What the job was charged: its reserved credits, or for a token-priced job what it used (0 when released). */
  credits: number;
}

export interface Balances {
  availableCredits: number;
  reservedCredits: number;
  walletCents: number;
  reservedWalletCents: number;
  walletActivated: boolean;
  activeJobs: number;
  queuedJobs: number;
}

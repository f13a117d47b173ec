/**
 * The statements of the workspace actor's payment messages (actors/workspace/payments.ts): a provider's
 * event applied to a pending payment and its order, a saved card's charge recorded, a subscription
 * started, renewed, ended or set to cancel, and the wallet's settings. Writes take the transaction of the
 * actor's group-commit unit, so each lands with the ledger entries it explains.
 */
import { emOf } from './orm.ts';
import type { Transaction } from './transaction.ts';
import type { Unit } from './unit.ts';
import type { PaymentPurpose } from './payments.ts';

/** A payment as the actor applies its provider's event to it. */
export interface PaymentRow {
  id: string;
  workspace_id: string;
  provider: string;
  purpose: PaymentPurpose;
  order_id: string;
  plan: string | null;
  amount_cents: number;
  status: string;
}

/** A subscription as the workspace actor renews, ends or cancels it (and the API shows it). */
export interface SubscriptionRow {
  id: string;
  workspace_id: string;
  plan: string;
  status: string;
  current_period_start: Date | string;
  current_period_end: Date | string;
  cancel_at_period_end: boolean;
  ended_at: Date | string | null;
  created_at: Date | string;
}

/** A provider event as recorded: once per event id, whether it changed anything or not. */
export interface BillingEventRecord {
  id: string;
  provider: string;
  type: string;
  paymentId: string;
  workspaceId: string;
  applied: boolean;
  at: Date;
}

export async function billingEventSeen(unit: Unit, eventId: string): Promise<boolean> {
  const rows = await emOf(unit).execute<Array<{ id: string }>>('select id from billing_events where id = ?', [eventId]);
  return rows.length > 0;
}

export async function recordBillingEvent(tx: Transaction, event: BillingEventRecord): Promise<void> {
  await tx.execute(
    `insert into billing_events (id, provider, type, payment_id, workspace_id, applied, received_at) values (?, ?, ?, ?, ?, ?, ?)
     on conflict (id) do nothing`,
    [event.id, event.provider, event.type, event.paymentId, event.workspaceId, event.applied, event.at],
    'run',
  );
}

/** One of the workspace's payments, or undefined when it has no payment of that id. */
export async function findPayment(unit: Unit, workspaceId: string, paymentId: string): Promise<PaymentRow | undefined> {
  const [payment] = await emOf(unit).execute<PaymentRow[]>('select * from payments where id = ? and workspace_id = ?', [paymentId, workspaceId]);
  return payment;
}

/** A pending payment settled; throws when it is no longer pending (its event was applied already). */
export async function settlePayment(tx: Transaction, paymentId: string, status: 'succeeded' | 'failed', at: Date, reason?: string): Promise<void> {
  const rows = await tx.execute<Array<{ id: string }>>(
    `update payments set status = ?, completed_at = ?, failure_reason = ? where id = ? and status = 'pending' returning id`,
    [status, at, reason ?? null, paymentId],
  );
  if (rows.length !== 1) throw new Error(`payment ${paymentId} is not pending`);
}

/** The order a payment paid for, marked paid, or failed while still pending. */
export async function settleOrder(
  tx: Transaction,
  purpose: 'credit_top_up' | 'wallet_deposit',
  orderId: string,
  status: 'paid' | 'failed',
  at: Date,
): Promise<void> {
  if (purpose === 'credit_top_up' && status === 'paid') {
    await tx.execute(`update credit_top_ups set status = 'paid', completed_at = ? where id = ?`, [at, orderId], 'run');
  } else if (purpose === 'credit_top_up') {
    await tx.execute(`update credit_top_ups set status = 'failed', completed_at = ? where id = ? and status = 'pending'`, [at, orderId], 'run');
  } else if (status === 'paid') {
    await tx.execute(`update wallet_deposits set status = 'paid', completed_at = ? where id = ?`, [at, orderId], 'run');
  } else {
    await tx.execute(`update wallet_deposits set status = 'failed', completed_at = ? where id = ? and status = 'pending'`, [at, orderId], 'run');
  }
}

export async function findTopUp(unit: Unit, id: string): Promise<{ id: string; credits: number } | undefined> {
  const [order] = await emOf(unit).execute<Array<{ id: string; credits: number }>>('select id, credits from credit_top_ups where id = ?', [id]);
  return order;
}

/**
 * A paid subscription starts a period at once: the active one it replaces ends now (no proration), the
 * new one is written active, and the workspace takes its plan.
 */
export async function startSubscription(
  tx: Transaction,
  subscription: { id: string; workspaceId: string; plan: string; periodEnd: Date },
  at: Date,
): Promise<void> {
  await tx.execute(
    `update subscriptions set status = 'replaced', ended_at = ?, updated_at = ? where workspace_id = ? and status = 'active'`,
    [at, at, subscription.workspaceId],
    'run',
  );
  await tx.execute(
    `insert into subscriptions (id, workspace_id, plan, status, current_period_start, current_period_end, cancel_at_period_end, created_at, updated_at)
     values (?, ?, ?, 'active', ?, ?, false, ?, ?)`,
    [subscription.id, subscription.workspaceId, subscription.plan, at, subscription.periodEnd, at, at],
    'run',
  );
  await setWorkspacePlan(tx, subscription.workspaceId, subscription.plan, at);
}

export async function findSubscription(unit: Unit, workspaceId: string, id: string): Promise<SubscriptionRow | undefined> {
  const [sub] = await emOf(unit).execute<SubscriptionRow[]>('select * from subscriptions where id = ? and workspace_id = ?', [id, workspaceId]);
  return sub;
}

/** An active subscription ended at `endedAt` (cancelled, or its renewal declined); the workspace back on `fallbackPlan`. */
export async function endSubscription(
  tx: Transaction,
  subscription: { id: string; workspaceId: string },
  status: 'canceled' | 'past_due',
  endedAt: Date,
  fallbackPlan: string,
  at: Date,
): Promise<void> {
  await tx.execute(
    'update subscriptions set status = ?, ended_at = ?, updated_at = ? where id = ? and status = ?',
    [status, endedAt, at, subscription.id, 'active'],
    'run',
  );
  await setWorkspacePlan(tx, subscription.workspaceId, fallbackPlan, at);
}

/** The next period of an active subscription still at `periodEnd`; false when it moved meanwhile. */
export async function advanceSubscription(tx: Transaction, id: string, periodEnd: Date, nextEnd: Date, at: Date): Promise<boolean> {
  const moved = await tx.execute<Array<{ id: string }>>(
    `update subscriptions set current_period_start = ?, current_period_end = ?, updated_at = ? where id = ? and current_period_end = ? and status = 'active' returning id`,
    [periodEnd, nextEnd, at, id, periodEnd],
  );
  return moved.length === 1;
}

/** The active subscription set to end at its period's end; null when the workspace has none. */
export async function cancelAtPeriodEnd(tx: Transaction, workspaceId: string, at: Date): Promise<SubscriptionRow | null> {
  const rows = await tx.execute<SubscriptionRow[]>(
    `update subscriptions set cancel_at_period_end = true, updated_at = ? where workspace_id = ? and status = 'active' returning *`,
    [at, workspaceId],
  );
  return rows[0] ?? null;
}

/** A charge of the saved card, made without the customer (a renewal or an auto-recharge), as its payment row. */
export interface SavedCardPayment {
  id: string;
  workspaceId: string;
  provider: string;
  purpose: 'subscription' | 'wallet_deposit';
  orderId: string;
  plan: string | null;
  amountCents: number;
  status: 'succeeded' | 'failed';
  description: string;
  failureReason: string | null;
  at: Date;
}

export async function insertSavedCardPayment(tx: Transaction, payment: SavedCardPayment): Promise<void> {
  await tx.execute(
    `insert into payments (id, workspace_id, provider, purpose, order_id, plan, amount_cents, status, description, failure_reason, created_at, completed_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      payment.id,
      payment.workspaceId,
      payment.provider,
      payment.purpose,
      payment.orderId,
      payment.plan,
      payment.amountCents,
      payment.status,
      payment.description,
      payment.failureReason,
      payment.at,
      payment.at,
    ],
    'run',
  );
}

/** The wallet deposit of an auto-recharge, paid or failed with its charge. */
export async function insertAutoRechargeDeposit(
  tx: Transaction,
  deposit: { id: string; workspaceId: string; amountCents: number; status: 'paid' | 'failed'; paymentId: string; at: Date },
): Promise<void> {
  await tx.execute(
    `insert into wallet_deposits (id, workspace_id, amount_cents, source, status, payment_id, created_at, completed_at) values (?, ?, ?, 'auto_recharge', ?, ?, ?, ?)`,
    [deposit.id, deposit.workspaceId, deposit.amountCents, deposit.status, deposit.paymentId, deposit.at, deposit.at],
    'run',
  );
}

export interface WalletSettingsRow {
  autoRecharge: { enabled: boolean; thresholdCents: number; amountCents: number };
  monthlySpendCapCents: number | null;
}

export async function writeWalletSettings(tx: Transaction, workspaceId: string, settings: WalletSettingsRow, at: Date): Promise<void> {
  await tx.execute(
    `update workspace_accounts set auto_recharge_enabled = ?, auto_recharge_threshold_cents = ?, auto_recharge_amount_cents = ?, monthly_spend_cap_cents = ?, updated_at = ?
      where workspace_id = ?`,
    [settings.autoRecharge.enabled, settings.autoRecharge.thresholdCents, settings.autoRecharge.amountCents, settings.monthlySpendCapCents, at, workspaceId],
    'run',
  );
}

/** A declined auto-recharge turns it off, so it is not retried on every job. */
export async function disableAutoRecharge(tx: Transaction, workspaceId: string): Promise<void> {
  await tx.execute('update workspace_accounts set auto_recharge_enabled = false where workspace_id = ?', [workspaceId], 'run');
}

/** The wallet's first deposit activates it. */
export async function activateWallet(tx: Transaction, workspaceId: string): Promise<void> {
  await tx.execute('update workspace_accounts set wallet_activated = true where workspace_id = ?', [workspaceId], 'run');
}

async function setWorkspacePlan(tx: Transaction, workspaceId: string, plan: string, at: Date): Promise<void> {
  await tx.execute('update workspaces set plan = ?, updated_at = ? where id = ?', [plan, at, workspaceId], 'run');
}

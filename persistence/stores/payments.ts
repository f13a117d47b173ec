/**
 * The statements of the orders a workspace pays for through its payment provider: pending payments and
 * their orders (credit top-ups, wallet deposits), what the checkout and portal pages read, and a
 * subscription as the API shows it. Applying a paid or failed payment is the workspace actor's.
 */
import { emOf } from './orm.ts';
import type { Unit } from './unit.ts';

export type PaymentPurpose = 'subscription' | 'credit_top_up' | 'wallet_deposit';

/** A payment waiting for its provider's signed event. */
export interface PendingPayment {
  id: string;
  workspaceId: string;
  /** The payment provider's id. */
  provider: string;
  purpose: PaymentPurpose;
  orderId: string;
  plan: string | null;
  amountCents: number;
  description: string;
  at: Date;
}

export async function insertPendingPayment(unit: Unit, payment: PendingPayment): Promise<void> {
  await emOf(unit).execute(
    `insert into payments (id, workspace_id, provider, purpose, order_id, plan, amount_cents, status, description, failure_reason, created_at, completed_at)
     values (?, ?, ?, ?, ?, ?, ?, 'pending', ?, null, ?, null)`,
    [payment.id, payment.workspaceId, payment.provider, payment.purpose, payment.orderId, payment.plan, payment.amountCents, payment.description, payment.at],
    'run',
  );
}

/** A credit top-up waiting for its payment. */
export async function insertPendingTopUp(
  unit: Unit,
  topUp: { id: string; workspaceId: string; credits: number; amountCents: number; paymentId: string; at: Date },
): Promise<void> {
  await emOf(unit).execute(
    `insert into credit_top_ups (id, workspace_id, credits, amount_cents, status, payment_id, created_at, completed_at) values (?, ?, ?, ?, 'pending', ?, ?, null)`,
    [topUp.id, topUp.workspaceId, topUp.credits, topUp.amountCents, topUp.paymentId, topUp.at],
    'run',
  );
}

/** A wallet deposit through checkout waiting for its payment. */
export async function insertPendingDeposit(
  unit: Unit,
  deposit: { id: string; workspaceId: string; amountCents: number; paymentId: string; at: Date },
): Promise<void> {
  await emOf(unit).execute(
    `insert into wallet_deposits (id, workspace_id, amount_cents, source, status, payment_id, created_at, completed_at) values (?, ?, ?, 'checkout', 'pending', ?, ?, null)`,
    [deposit.id, deposit.workspaceId, deposit.amountCents, deposit.paymentId, deposit.at],
    'run',
  );
}

/** The plan of a workspace's active subscription, if it has one. */
export async function activeSubscriptionPlan(unit: Unit, workspaceId: string): Promise<{ plan: string } | undefined> {
  const [active] = await emOf(unit).execute<Array<{ plan: string }>>(`select plan from subscriptions where workspace_id = ? and status = 'active'`, [
    workspaceId,
  ]);
  return active;
}

/** A workspace's active subscription, every column, if it has one. */
export async function activeSubscription(unit: Unit, workspaceId: string): Promise<(Record<string, unknown> & { id: string }) | undefined> {
  const [row] = await emOf(unit).execute<Array<Record<string, unknown> & { id: string }>>(
    `select * from subscriptions where workspace_id = ? and status = 'active'`,
    [workspaceId],
  );
  return row;
}

/** What the local portal page shows of a workspace's active subscriptions. */
export function activeSubscriptionTerms(
  unit: Unit,
  workspaceId: string,
): Promise<Array<{ plan: string; current_period_end: Date; cancel_at_period_end: boolean }>> {
  return emOf(unit).execute<Array<{ plan: string; current_period_end: Date; cancel_at_period_end: boolean }>>(
    `select plan, current_period_end, cancel_at_period_end from subscriptions where workspace_id = ? and status = 'active'`,
    [workspaceId],
  );
}

/** A workspace's 20 latest payments, newest first, as the local portal page shows them. */
export function latestPayments(
  unit: Unit,
  workspaceId: string,
): Promise<Array<{ id: string; description: string; amount_cents: number; status: string; created_at: Date }>> {
  return emOf(unit).execute<Array<{ id: string; description: string; amount_cents: number; status: string; created_at: Date }>>(
    'select id, description, amount_cents, status, created_at from payments where workspace_id = ? order by created_at desc, id desc limit 20',
    [workspaceId],
  );
}

/** A payment of the local provider as its checkout page shows it. */
export interface LocalPaymentView {
  id: string;
  amount_cents: number;
  description: string;
  status: string;
}

export async function localPayment(unit: Unit, paymentId: string): Promise<LocalPaymentView | undefined> {
  const [payment] = await emOf(unit).execute<LocalPaymentView[]>(
    `select id, amount_cents, description, status from payments where id = ? and provider = 'local'`,
    [paymentId],
  );
  return payment;
}

/** The workspace a payment belongs to, or undefined for an unknown payment. */
export async function workspaceOfPayment(unit: Unit, paymentId: string): Promise<string | undefined> {
  const rows = await emOf(unit).execute<Array<{ workspace_id: string }>>('select workspace_id from payments where id = ?', [paymentId]);
  return rows[0]?.workspace_id;
}

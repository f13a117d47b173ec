/**
 * A verified payment provider's event about one of the workspace's payments, as a pure decision
 * (decision.ts): applied once (its record and the payment's outcome in one transaction), a top-up's credits,
 * a deposit's cents or a subscription's first period granted in the same transaction.
 */
import { deposit, grant } from '../../domain/account.ts';
import type { PlanEntitlements } from '../../domain/plans.ts';
import type { PaymentRow } from '../../persistence/stores/payment-outcomes.ts';
import { addMonth, periodGrantReference } from '../billing/period.ts';
import type { ProviderEvent } from '../billing/provider.ts';
import { changePlan, moneyCommit } from './decide-commit.ts';
import type { Decision, PaymentStatement, WorkspaceEffect } from './decision.ts';
import type { PaymentEventReply } from './protocol.ts';
import type { WorkspaceState } from './state.ts';

/** What the actor read before deciding an event, each only when the one before asks for it. */
export interface PaymentEventLookups {
  /** The event was recorded already. */
  seen: boolean;
  /** The payment it is about (not seen). */
  payment?: PaymentRow;
  /** The top-up a pending credit top-up pays. */
  topUp?: { id: string; credits: number };
  /** The plan a pending subscription payment buys, as the catalog serves it. */
  plan?: PlanEntitlements;
}

export function decidePaymentEvent<S extends WorkspaceState>(
  state: S,
  provider: string,
  event: ProviderEvent,
  looked: PaymentEventLookups,
  now: number,
): Decision<S, PaymentEventReply> {
  if (looked.seen) return { state, reply: { applied: false, reason: 'duplicate event' }, effects: [] };
  const at = new Date(now);
  const { payment } = looked;
  const record = (applied: boolean): PaymentStatement => ({
    kind: 'record_billing_event',
    id: event.id,
    provider,
    eventType: event.type,
    paymentId: event.paymentId,
    applied,
    at,
  });
  if (!payment || payment.provider !== provider || payment.status !== 'pending') {
    const reason = payment ? `payment already ${payment.status}` : 'unknown payment';
    return { state, reply: { applied: false, reason }, effects: [{ type: 'commit', statements: [record(false)] }] };
  }

  if (event.type === 'payment.failed') {
    const statements: PaymentStatement[] = [
      record(true),
      { kind: 'settle_payment', paymentId: payment.id, status: 'failed', at, failureReason: event.failureReason ?? 'declined' },
    ];
    if (payment.purpose !== 'subscription')
      statements.push({ kind: 'settle_order', purpose: payment.purpose, orderId: payment.order_id, status: 'failed', at });
    return { state, reply: { applied: true }, effects: [{ type: 'commit', statements }] };
  }

  const paid: PaymentStatement = { kind: 'settle_payment', paymentId: payment.id, status: 'succeeded', at };
  switch (payment.purpose) {
    case 'credit_top_up': {
      const order = looked.topUp;
      if (!order) throw new Error(`payment ${payment.id} pays a missing top-up ${payment.order_id}`);
      const money = grant(state.account, Number(order.credits), `top:${order.id}`);
      const effect = moneyCommit(state, money, at, [
        record(true),
        paid,
        { kind: 'settle_order', purpose: 'credit_top_up', orderId: order.id, status: 'paid', at },
      ]);
      return { state, reply: { applied: true }, effects: [effect] };
    }
    case 'wallet_deposit': {
      const money = deposit(state.account, Number(payment.amount_cents), `dep:${payment.order_id}`);
      const effect = moneyCommit(state, money, at, [
        record(true),
        paid,
        { kind: 'settle_order', purpose: 'wallet_deposit', orderId: payment.order_id, status: 'paid', at },
      ]);
      return { state, reply: { applied: true }, effects: [effect] };
    }
    case 'subscription': {
      const { plan } = looked;
      if (!plan) throw new Error(`payment ${payment.id} buys a subscription, and its plan was not looked up`);
      const subscriptionId = payment.order_id;
      const end = addMonth(now);
      const money = grant(state.account, plan.monthlyCredits, periodGrantReference(subscriptionId, now));
      // A new plan starts a new period at once; the subscription it replaces ends now (no proration).
      const effects: WorkspaceEffect[] = [
        moneyCommit(state, money, at, [record(true), paid, { kind: 'start_subscription', id: subscriptionId, plan: plan.id, periodEnd: new Date(end), at }]),
      ];
      changePlan(state, plan, effects);
      effects.push({ type: 'schedule_renewal', subscriptionId, at: end });
      return { state, reply: { applied: true }, effects };
    }
  }
}

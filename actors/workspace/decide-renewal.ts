/**
 * A subscription's renewal, as pure decisions (decision.ts): ended at its period's end when it was set to,
 * else its next period charged to the saved card beside the mailbox, and that charge's result applied.
 */
import { grant } from '../../domain/account.ts';
import type { PlanEntitlements } from '../../domain/plans.ts';
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { SavedCardPayment, SubscriptionRow } from '../../persistence/stores/payment-outcomes.ts';
import { nextPeriodEnd, periodGrantReference } from '../billing/period.ts';
import type { ChargeResult } from '../billing/provider.ts';
import { changePlan, moneyCommit } from './decide-commit.ts';
import type { Decision, PaymentStatement, WorkspaceEffect } from './decision.ts';
import type { RenewalCharge, RenewReply } from './protocol.ts';
import type { WorkspaceState } from './state.ts';

/** A renewal whose charge got no answer is tried again after this long. */
export const RENEWAL_RETRY_MS = 60_000;

/** The entry of a subscription's renewal charge under way in BillingDeps.charges. */
export const renewalChargeKey = (workspaceId: string, subscriptionId: string) => `renewal:${workspaceId}:${subscriptionId}`;

/** What the actor read before deciding a renewal. */
export interface RenewalLookups {
  /** A charge for this renewal is under way (then nothing else is read). */
  underWay: boolean;
  subscription?: SubscriptionRow;
  /** The subscription's plan as the catalog serves it. */
  plan?: PlanEntitlements;
  /** The plan a workspace goes back to when its subscription ends: the catalog's default. */
  fallback: PlanEntitlements;
  /** The id of the payment, should the card be charged. */
  paymentId: string;
}

/**
 * `renew`: a subscription whose period has ended is ended (cancelled at period end), or its next period charged
 * to the saved card, beside the mailbox: `renewal_charged` applies the result and schedules the next renewal
 * itself, so the answer is then null (nothing for the scheduler to do). A renewal asked again while its charge
 * is under way answers the same: it is never charged twice.
 */
export function decideRenewal<S extends WorkspaceState>(state: S, subscriptionId: string, looked: RenewalLookups, now: number): Decision<S, RenewReply> {
  const nothing: RenewReply = { nextAt: null };
  const sub = looked.subscription;
  if (looked.underWay || sub?.status !== 'active') return { state, reply: nothing, effects: [] };
  const end = new Date(sub.current_period_end).getTime();
  if (now < end) return { state, reply: { nextAt: end }, effects: [] };
  const effects: WorkspaceEffect[] = [];
  if (sub.cancel_at_period_end) {
    endNow(state, sub.id, 'canceled', end, looked.fallback, new Date(now), [], effects);
    return { state, reply: nothing, effects };
  }
  const { plan } = looked;
  if (!plan) throw new Error(`subscription ${sub.id} is renewed, and its plan was not looked up`);
  const charge: RenewalCharge = {
    paymentId: looked.paymentId,
    subscriptionId: sub.id,
    plan: plan.id,
    amountCents: plan.monthlyPriceCents,
    description: `${plan.name} plan, period from ${new Date(end).toISOString().slice(0, 10)}`,
    periodEnd: end,
    nextEnd: nextPeriodEnd(new Date(sub.created_at).getTime(), end),
    at: now,
  };
  effects.push(
    { type: 'charge_under_way', key: renewalChargeKey(state.workspaceId, subscriptionId) },
    { type: 'charge_saved_card', purpose: 'renewal', charge },
  );
  return { state, reply: nothing, effects };
}

/** What the actor reads of the service for a renewal's result. */
export interface RenewalChargedFacts {
  /** The payment provider's id, written with the payment. */
  provider: string;
  /** The plan charged for, as the catalog serves it. */
  plan: PlanEntitlements;
  fallback: PlanEntitlements;
}

/**
 * `renewal_charged`: the next period granted with its payment, or the subscription ended past due. A charge
 * that got no answer (the provider could not be reached) is tried again in a minute. The card charged, its
 * payment and the period's credits are written whatever became of the subscription meanwhile (its period moves
 * only if it is still the active one at that end).
 */
export function decideRenewalCharged<S extends WorkspaceState>(
  state: S,
  charge: RenewalCharge,
  result: ChargeResult | null,
  error: string | undefined,
  facts: RenewalChargedFacts,
  now: number,
): Decision<S, NoReply> {
  const effects: WorkspaceEffect[] = [{ type: 'charge_done', key: renewalChargeKey(state.workspaceId, charge.subscriptionId) }];
  const { subscriptionId, paymentId } = charge;
  if (!result) {
    effects.push(
      { type: 'log', level: 'error', fields: { subscriptionId, paymentId, error }, message: 'a renewal charge got no answer; retrying in a minute' },
      { type: 'schedule_renewal', subscriptionId, at: now + RENEWAL_RETRY_MS },
    );
    return { state, reply: undefined, effects };
  }
  const at = new Date(now);
  const payment: Omit<SavedCardPayment, 'status' | 'failureReason'> = {
    id: paymentId,
    workspaceId: state.workspaceId,
    provider: facts.provider,
    purpose: 'subscription',
    orderId: subscriptionId,
    plan: charge.plan,
    amountCents: charge.amountCents,
    description: charge.description,
    at,
  };
  if (!result.ok) {
    const failed: PaymentStatement = { kind: 'insert_saved_card_payment', payment: { ...payment, status: 'failed', failureReason: result.reason } };
    endNow(state, subscriptionId, 'past_due', charge.periodEnd, facts.fallback, at, [failed], effects);
    return { state, reply: undefined, effects };
  }
  const money = grant(state.account, facts.plan.monthlyCredits, periodGrantReference(subscriptionId, charge.periodEnd));
  effects.push(
    moneyCommit(state, money, at, [
      { kind: 'insert_saved_card_payment', payment: { ...payment, status: 'succeeded', failureReason: null } },
      {
        kind: 'advance_subscription',
        id: subscriptionId,
        periodEnd: new Date(charge.periodEnd),
        nextEnd: new Date(charge.nextEnd),
        at,
        ifAdvanced: [{ type: 'schedule_renewal', subscriptionId, at: charge.nextEnd }],
        ifMoved: [
          {
            type: 'log',
            level: 'warn',
            fields: { subscriptionId },
            message: 'a renewed subscription changed while its card was charged; its payment and credits were kept',
          },
        ],
      },
    ]),
  );
  return { state, reply: undefined, effects };
}

/** Ends an active subscription (after `before`, in the same transaction) and puts the workspace back on `fallback`. */
function endNow(
  state: WorkspaceState,
  subscriptionId: string,
  status: 'canceled' | 'past_due',
  end: number,
  fallback: PlanEntitlements,
  at: Date,
  before: PaymentStatement[],
  effects: WorkspaceEffect[],
): void {
  effects.push({
    type: 'commit',
    statements: [...before, { kind: 'end_subscription', id: subscriptionId, status, endedAt: new Date(end), fallbackPlan: fallback.id, at }],
  });
  changePlan(state, fallback, effects);
}

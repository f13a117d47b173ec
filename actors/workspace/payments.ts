import type { Outcome } from '../../runtime/actor-behavior.ts';
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { ActorContext } from '../kinds.ts';
import { newId } from '../../persistence/ids.ts';
import {
  billingEventSeen,
  cancelAtPeriodEnd,
  findPayment,
  findSubscription,
  findTopUp,
  type SubscriptionRow,
} from '../../persistence/stores/payment-outcomes.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { depsOf } from '../deps.ts';
import type { ProviderEvent } from '../billing/provider.ts';
import { decidePaymentEvent, type PaymentEventLookups } from './decide-payment-event.ts';
import { decideAutoRecharge, decideRechargeCharged, rechargeChargeKey } from './decide-recharge.ts';
import { decideRenewal, decideRenewalCharged, renewalChargeKey } from './decide-renewal.ts';
import { decideWalletSettings, walletSnapshotOf } from './decide-wallet.ts';
import { answerInMailbox } from './perform.ts';
import type { PaymentEventReply, RenewReply, WalletSettingsPatch, WalletSnapshot, WorkspaceMessage } from './protocol.ts';
import type { WorkspaceActorState } from './state.ts';

type State = WorkspaceActorState;

/**
 * The workspace actor's payment messages: provider events, subscription renewals and cancellation, wallet
 * settings and auto-recharge. Each reads what its decider (decide-payment-event.ts, decide-renewal.ts,
 * decide-recharge.ts, decide-wallet.ts) needs of the database, and performs the decision in the mailbox: each
 * awaits its own commit before the actor takes its next message, so what it read (is this payment still
 * pending? was this event seen?) stays true until it has written; the ledger's unique references are the last
 * guard against applying anything twice.
 *
 * A charge of the saved card goes to the payment provider over the network: it is made beside the mailbox
 * (the actor takes its next messages meanwhile) and its result comes back as a message of its own,
 * `renewal_charged` or `recharge_charged`, as Akka's pipeToSelf does. Until then the charge is kept in
 * `billing.charges`, so that no second charge for the same purpose starts while one is under way.
 */

/** `payment_event`: the event's record read, then (not seen) its payment, then (pending) the top-up or plan it pays for. */
export async function applyPaymentEvent(state: State, provider: string, event: ProviderEvent, ctx: ActorContext): Promise<Outcome<State, PaymentEventReply>> {
  const now = ctx.clock.now();
  const unit = openUnit(ctx.db);
  const looked: PaymentEventLookups = { seen: await billingEventSeen(unit, event.id) };
  if (!looked.seen) {
    const payment = await findPayment(unit, state.workspaceId, event.paymentId);
    looked.payment = payment;
    if (payment?.provider === provider && payment.status === 'pending' && event.type !== 'payment.failed') {
      if (payment.purpose === 'credit_top_up') looked.topUp = await findTopUp(unit, payment.order_id);
      const { catalog } = depsOf(ctx);
      if (payment.purpose === 'subscription') looked.plan = catalog.plan(payment.plan ?? catalog.defaultPlan().id);
    }
  }
  return answerInMailbox(decidePaymentEvent(state, provider, event, looked, now), ctx);
}

/** `renew`: nothing read while its charge is under way; else the subscription, and the plans it may move between. */
export async function renewSubscription(state: State, subscriptionId: string, ctx: ActorContext): Promise<Outcome<State, RenewReply>> {
  const now = ctx.clock.now();
  const { billing, catalog } = depsOf(ctx);
  const underWay = billing.charges.has(renewalChargeKey(state.workspaceId, subscriptionId));
  const subscription = underWay ? undefined : await findSubscription(openUnit(ctx.db), state.workspaceId, subscriptionId);
  const looked = {
    underWay,
    subscription,
    plan: subscription && catalog.plan(subscription.plan),
    fallback: catalog.plan(catalog.defaultPlan().id),
    paymentId: newId('pay', now),
  };
  return answerInMailbox(decideRenewal(state, subscriptionId, looked, now), ctx);
}

/** `renewal_charged`: the provider's id and the plans, as the catalog serves them now. */
export function renewalCharged(state: State, msg: Extract<WorkspaceMessage, { type: 'renewal_charged' }>, ctx: ActorContext): Promise<Outcome<State, NoReply>> {
  const { billing, catalog } = depsOf(ctx);
  const facts = { provider: billing.provider.id, plan: catalog.plan(msg.charge.plan), fallback: catalog.plan(catalog.defaultPlan().id) };
  return answerInMailbox(decideRenewalCharged(state, msg.charge, msg.result, msg.error, facts, ctx.clock.now()), ctx);
}

/**
 * `cancel_subscription`: marks the live subscription to end at its period's end, and answers it (null when there
 * is none; asking twice changes nothing). Not a decision: the statement finds the subscription and answers it.
 */
export async function cancelSubscription(state: State, ctx: ActorContext): Promise<Outcome<State, SubscriptionRow | null>> {
  const at = new Date(ctx.clock.now());
  let row: SubscriptionRow | null = null;
  await ctx.writer.write(async (tx) => {
    row = await cancelAtPeriodEnd(tx, state.workspaceId, at);
  });
  return { state, reply: row };
}

export function walletSnapshot(state: State, ctx: ActorContext): Outcome<State, WalletSnapshot> {
  return { state, reply: walletSnapshotOf(state, ctx.clock.now()) };
}

export function updateWalletSettings(
  state: State,
  patch: WalletSettingsPatch,
  ctx: ActorContext,
): Promise<Outcome<State, WalletSnapshot | { refused: string }>> {
  return answerInMailbox(decideWalletSettings(state, patch, ctx.clock.now()), ctx);
}

/** `auto_recharge`: whether one is under way on this node (kept across a reload of the state), and the ids of its payment and deposit. */
export function autoRecharge(state: State, ctx: ActorContext): Promise<Outcome<State, NoReply>> {
  const now = ctx.clock.now();
  const looked = {
    underWay: depsOf(ctx).billing.charges.has(rechargeChargeKey(state.workspaceId)),
    paymentId: newId('pay', now),
    depositId: newId('dep', now),
  };
  return answerInMailbox(decideAutoRecharge(state, looked, now), ctx);
}

export function rechargeCharged(
  state: State,
  msg: Extract<WorkspaceMessage, { type: 'recharge_charged' }>,
  ctx: ActorContext,
): Promise<Outcome<State, NoReply>> {
  return answerInMailbox(decideRechargeCharged(state, msg.charge, msg.result, depsOf(ctx).billing.provider.id, ctx.clock.now()), ctx);
}

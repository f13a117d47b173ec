import type { Outcome } from '../../runtime/actor-behavior.ts';
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { ActorContext } from '../kinds.ts';
import { newId } from '../../persistence/ids.ts';
import {
  activateWallet,
  advanceSubscription,
  billingEventSeen,
  cancelAtPeriodEnd,
  disableAutoRecharge,
  endSubscription,
  findPayment,
  findSubscription,
  findTopUp,
  insertAutoRechargeDeposit,
  insertSavedCardPayment,
  recordBillingEvent,
  settleOrder,
  settlePayment,
  startSubscription,
  writeWalletSettings,
  type SubscriptionRow,
} from '../../persistence/stores/payment-outcomes.ts';
import type { Transaction } from '../../persistence/stores/transaction.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { depsOf } from '../deps.ts';
import { addMonth, nextPeriodEnd, periodGrantReference } from '../billing/period.ts';
import type { ChargeResult, PaymentIntent, ProviderEvent } from '../billing/provider.ts';
import { checkWalletSettings, deposit, grant, needsAutoRecharge, spendAt, type MoneyDecision, type WalletSettings } from '../../domain/account.ts';
import type { PaymentEventReply, RechargeCharge, RenewalCharge, RenewReply, WalletSettingsPatch, WalletSnapshot } from './protocol.ts';
import { writeMoney } from '../../persistence/stores/workspace/money.ts';
import type { WorkspaceState } from './state.ts';

/** The entries of `billing.charges`: a subscription's renewal charge, a workspace's auto-recharge charge. */
const renewalChargeKey = (workspaceId: string, subscriptionId: string) => `renewal:${workspaceId}:${subscriptionId}`;
const rechargeChargeKey = (workspaceId: string) => `recharge:${workspaceId}`;

/** A renewal whose charge got no answer is tried again after this long. */
const RENEWAL_RETRY_MS = 60_000;

/**
 * The workspace actor's payment messages: provider events, subscription renewals and cancellation, wallet
 * settings and auto-recharge. Each awaits its own commit before the actor takes its next message, so what
 * it reads from the database (is this payment still pending? was this event seen?) stays true until it
 * has written; the ledger's unique references are the last guard against applying anything twice.
 *
 * A charge of the saved card goes to the payment provider over the network: it is made beside the mailbox
 * (the actor takes its next messages meanwhile) and its result comes back as a message of its own,
 * `renewal_charged` or `recharge_charged`, as Akka's pipeToSelf does. Until then the charge is kept in
 * `billing.charges`, so that no second charge for the same purpose starts while one is under way.
 */

export async function applyPaymentEvent(
  state: WorkspaceState,
  provider: string,
  event: ProviderEvent,
  ctx: ActorContext,
): Promise<Outcome<WorkspaceState, PaymentEventReply>> {
  const unit = openUnit(ctx.db);
  const at = new Date(ctx.clock.now());
  if (await billingEventSeen(unit, event.id)) return { state, reply: { applied: false, reason: 'duplicate event' } };
  const payment = await findPayment(unit, state.workspaceId, event.paymentId);
  const record = (tx: Transaction, applied: boolean) =>
    recordBillingEvent(tx, { id: event.id, provider, type: event.type, paymentId: event.paymentId, workspaceId: state.workspaceId, applied, at });
  if (!payment || payment.provider !== provider || payment.status !== 'pending') {
    await ctx.writer.write((tx) => record(tx, false));
    return { state, reply: { applied: false, reason: payment ? `payment already ${payment.status}` : 'unknown payment' } };
  }

  if (event.type === 'payment.failed') {
    await ctx.writer.write(async (tx) => {
      await record(tx, true);
      await settlePayment(tx, payment.id, 'failed', at, event.failureReason ?? 'declined');
      if (payment.purpose !== 'subscription') await settleOrder(tx, payment.purpose, payment.order_id, 'failed', at);
    });
    return { state, reply: { applied: true } };
  }

  switch (payment.purpose) {
    case 'credit_top_up': {
      const order = await findTopUp(unit, payment.order_id);
      if (!order) throw new Error(`payment ${payment.id} pays a missing top-up ${payment.order_id}`);
      const money = grant(state.account, Number(order.credits), `top:${order.id}`);
      await commitMoney(state, ctx, money, at, async (tx) => {
        await record(tx, true);
        await settlePayment(tx, payment.id, 'succeeded', at);
        await settleOrder(tx, 'credit_top_up', order.id, 'paid', at);
      });
      return { state, reply: { applied: true } };
    }
    case 'wallet_deposit': {
      const money = deposit(state.account, Number(payment.amount_cents), `dep:${payment.order_id}`);
      await commitMoney(state, ctx, money, at, async (tx) => {
        await record(tx, true);
        await settlePayment(tx, payment.id, 'succeeded', at);
        await settleOrder(tx, 'wallet_deposit', payment.order_id, 'paid', at);
      });
      return { state, reply: { applied: true } };
    }
    case 'subscription': {
      const plan = depsOf(ctx).catalog.plan(payment.plan ?? depsOf(ctx).catalog.defaultPlan().id);
      const subscriptionId = payment.order_id;
      const start = at.getTime();
      const end = addMonth(start);
      const money = grant(state.account, plan.monthlyCredits, periodGrantReference(subscriptionId, start));
      await commitMoney(state, ctx, money, at, async (tx) => {
        await record(tx, true);
        await settlePayment(tx, payment.id, 'succeeded', at);
        // A new plan starts a new period at once; the subscription it replaces ends now (no proration).
        await startSubscription(tx, { id: subscriptionId, workspaceId: state.workspaceId, plan: plan.id, periodEnd: new Date(end) }, at);
      });
      changePlan(state, plan.id, ctx);
      depsOf(ctx).billing.renewals.schedule(state.workspaceId, subscriptionId, end);
      return { state, reply: { applied: true } };
    }
  }
}

/**
 * A subscription whose period has ended: ended (cancelled at period end), or its next period charged to the
 * saved card. The charge is made beside the mailbox and its result handled as `renewal_charged`, which
 * schedules the next renewal itself: the answer here is then null (nothing for the scheduler to do). A
 * renewal asked again while its charge is under way answers the same: it is never charged twice.
 */
export async function renewSubscription(state: WorkspaceState, subscriptionId: string, ctx: ActorContext): Promise<Outcome<WorkspaceState, RenewReply>> {
  const now = ctx.clock.now();
  const { charges } = depsOf(ctx).billing;
  const key = renewalChargeKey(state.workspaceId, subscriptionId);
  if (charges.has(key)) return { state, reply: { nextAt: null } };
  const sub = await findSubscription(openUnit(ctx.db), state.workspaceId, subscriptionId);
  if (sub?.status !== 'active') return { state, reply: { nextAt: null } };
  const end = new Date(sub.current_period_end).getTime();
  if (now < end) return { state, reply: { nextAt: end } };
  if (sub.cancel_at_period_end) {
    await endNow(state, sub, 'canceled', end, ctx);
    return { state, reply: { nextAt: null } };
  }

  const plan = depsOf(ctx).catalog.plan(sub.plan);
  const charge: RenewalCharge = {
    paymentId: newId('pay', now),
    subscriptionId: sub.id,
    plan: plan.id,
    amountCents: plan.monthlyPriceCents,
    description: `${plan.name} plan, period from ${new Date(end).toISOString().slice(0, 10)}`,
    periodEnd: end,
    nextEnd: nextPeriodEnd(new Date(sub.created_at).getTime(), end),
    at: now,
  };
  charges.add(key);
  ctx.pipeToSelf(chargeSavedCard(ctx, state.workspaceId, charge), (outcome) =>
    outcome.ok
      ? { type: 'renewal_charged', charge, result: outcome.value }
      : { type: 'renewal_charged', charge, result: null, error: (outcome.error as Error)?.message ?? String(outcome.error) },
  );
  return { state, reply: { nextAt: null } };
}

/**
 * A renewal's charge came back: the next period granted with its payment, or the subscription ended past
 * due. A charge that got no answer (the provider could not be reached) is tried again in a minute.
 */
export async function renewalCharged(
  state: WorkspaceState,
  charge: RenewalCharge,
  result: ChargeResult | null,
  error: string | undefined,
  ctx: ActorContext,
): Promise<Outcome<WorkspaceState, NoReply>> {
  const { charges, renewals } = depsOf(ctx).billing;
  charges.delete(renewalChargeKey(state.workspaceId, charge.subscriptionId));
  const at = new Date(ctx.clock.now());
  if (!result) {
    ctx.logger.error({ subscriptionId: charge.subscriptionId, paymentId: charge.paymentId, error }, 'a renewal charge got no answer; retrying in a minute');
    renewals.schedule(state.workspaceId, charge.subscriptionId, at.getTime() + RENEWAL_RETRY_MS);
    return { state };
  }
  const payment = {
    id: charge.paymentId,
    workspaceId: state.workspaceId,
    provider: depsOf(ctx).billing.provider.id,
    purpose: 'subscription' as const,
    orderId: charge.subscriptionId,
    plan: charge.plan,
    amountCents: charge.amountCents,
    description: charge.description,
    at,
  };
  if (!result.ok) {
    await endNow(state, { id: charge.subscriptionId }, 'past_due', charge.periodEnd, ctx, (tx) =>
      insertSavedCardPayment(tx, { ...payment, status: 'failed', failureReason: result.reason }),
    );
    return { state };
  }
  const plan = depsOf(ctx).catalog.plan(charge.plan);
  const money = grant(state.account, plan.monthlyCredits, periodGrantReference(charge.subscriptionId, charge.periodEnd));
  let advanced = false;
  // The card was charged: its payment and the period's credits are written whatever became of the
  // subscription meanwhile (its period moves only if it is still the active one at that end).
  await commitMoney(state, ctx, money, at, async (tx) => {
    await insertSavedCardPayment(tx, { ...payment, status: 'succeeded', failureReason: null });
    advanced = await advanceSubscription(tx, charge.subscriptionId, new Date(charge.periodEnd), new Date(charge.nextEnd), at);
  });
  if (advanced) renewals.schedule(state.workspaceId, charge.subscriptionId, charge.nextEnd);
  else
    ctx.logger.warn({ subscriptionId: charge.subscriptionId }, 'a renewed subscription changed while its card was charged; its payment and credits were kept');
  return { state };
}

/** Ends an active subscription (with `also`'s rows in the same transaction) and puts the workspace back on the catalog's default plan. */
async function endNow(
  state: WorkspaceState,
  sub: Pick<SubscriptionRow, 'id'>,
  status: 'canceled' | 'past_due',
  end: number,
  ctx: ActorContext,
  also?: (tx: Transaction) => Promise<void>,
): Promise<void> {
  const at = new Date(ctx.clock.now());
  // Back to the catalog's default plan (free in the shipped one).
  const fallback = depsOf(ctx).catalog.defaultPlan().id;
  await ctx.writer.write(async (tx) => {
    await also?.(tx);
    await endSubscription(tx, { id: sub.id, workspaceId: state.workspaceId }, status, new Date(end), fallback, at);
  });
  changePlan(state, fallback, ctx);
}

/** The saved card charged for `charge`, beside the mailbox. */
function chargeSavedCard(ctx: ActorContext, workspaceId: string, charge: RechargeCharge | RenewalCharge): Promise<ChargeResult> {
  const intent: PaymentIntent = { paymentId: charge.paymentId, workspaceId, amountCents: charge.amountCents, description: charge.description };
  return depsOf(ctx).billing.provider.chargeSaved(intent);
}

/** Marks the live subscription to end at its period's end; null when there is none. Asking twice changes nothing. */
export async function cancelSubscription(state: WorkspaceState, ctx: ActorContext): Promise<Outcome<WorkspaceState, SubscriptionRow | null>> {
  const at = new Date(ctx.clock.now());
  let row: SubscriptionRow | null = null;
  await ctx.writer.write(async (tx) => {
    row = await cancelAtPeriodEnd(tx, state.workspaceId, at);
  });
  return { state, reply: row };
}

export function walletSnapshot(state: WorkspaceState, ctx: ActorContext): Outcome<WorkspaceState, WalletSnapshot> {
  const reply: WalletSnapshot = {
    balanceCents: state.account.walletCents,
    reservedCents: state.account.reservedWalletCents,
    activated: state.account.walletActivated,
    settings: state.wallet,
    monthlySpend: spendAt(state.spend, ctx.clock.now()),
    autoRechargeUnderWay: state.recharging,
  };
  return { state, reply };
}

export async function updateWalletSettings(
  state: WorkspaceState,
  patch: WalletSettingsPatch,
  ctx: ActorContext,
): Promise<Outcome<WorkspaceState, WalletSnapshot | { refused: string }>> {
  const at = new Date(ctx.clock.now());
  // Merged here, one message at a time, so concurrent partial updates do not undo each other.
  const settings: WalletSettings = {
    autoRecharge: { ...state.wallet.autoRecharge, ...patch.autoRecharge },
    monthlySpendCapCents: patch.monthlySpendCapCents === undefined ? state.wallet.monthlySpendCapCents : patch.monthlySpendCapCents,
  };
  const problem = checkWalletSettings(settings);
  if (problem) return { state, reply: { refused: problem } };
  await ctx.writer.write((tx) => writeWalletSettings(tx, state.workspaceId, settings, at));
  state.wallet = settings;
  maybeAutoRecharge(state, ctx);
  return walletSnapshot(state, ctx);
}

/** Starts an automatic deposit when the wallet fell under its threshold; one at a time. */
export function maybeAutoRecharge(state: WorkspaceState, ctx: ActorContext): void {
  if (!needsAutoRecharge(state.account, state.wallet, state.recharging)) return;
  state.recharging = true;
  ctx.actors.tell('ws', state.workspaceId, { type: 'auto_recharge' });
}

/**
 * Charges the saved card for the configured amount, beside the mailbox; `recharge_charged` deposits it (a
 * deposit with source auto_recharge). One charge at a time per workspace, even across a reload of the state.
 */
export function autoRecharge(state: WorkspaceState, ctx: ActorContext): Outcome<WorkspaceState, NoReply> {
  const { charges } = depsOf(ctx).billing;
  const key = rechargeChargeKey(state.workspaceId);
  // One under way already (the state was reloaded since it started): its result ends `recharging`.
  if (charges.has(key)) return { state };
  const settings = state.wallet.autoRecharge;
  if (!needsAutoRecharge(state.account, state.wallet, false)) {
    state.recharging = false;
    return { state };
  }
  const now = ctx.clock.now();
  const charge: RechargeCharge = {
    paymentId: newId('pay', now),
    depositId: newId('dep', now),
    amountCents: settings.amountCents,
    description: `Wallet auto-recharge of ${settings.amountCents} cents`,
    at: now,
  };
  state.recharging = true;
  charges.add(key);
  ctx.pipeToSelf(chargeSavedCard(ctx, state.workspaceId, charge), (outcome) => {
    if (!outcome.ok) ctx.logger.error({ err: outcome.error, paymentId: charge.paymentId }, 'an auto-recharge charge got no answer');
    return { type: 'recharge_charged', charge, result: outcome.ok ? outcome.value : null };
  });
  return { state };
}

/**
 * An auto-recharge's charge came back: deposited, or (declined) recorded as failed with auto-recharge turned
 * off, so it is not retried on every job. A charge that got no answer writes nothing; the next job that
 * leaves the wallet under its threshold tries again.
 */
export async function rechargeCharged(
  state: WorkspaceState,
  charge: RechargeCharge,
  result: ChargeResult | null,
  ctx: ActorContext,
): Promise<Outcome<WorkspaceState, NoReply>> {
  depsOf(ctx).billing.charges.delete(rechargeChargeKey(state.workspaceId));
  state.recharging = false;
  if (!result) return { state };
  const at = new Date(ctx.clock.now());
  const rows = async (tx: Transaction, paid: boolean) => {
    await insertSavedCardPayment(tx, {
      id: charge.paymentId,
      workspaceId: state.workspaceId,
      provider: depsOf(ctx).billing.provider.id,
      purpose: 'wallet_deposit',
      orderId: charge.depositId,
      plan: null,
      amountCents: charge.amountCents,
      status: paid ? 'succeeded' : 'failed',
      description: charge.description,
      failureReason: result.ok ? null : result.reason,
      at,
    });
    await insertAutoRechargeDeposit(tx, {
      id: charge.depositId,
      workspaceId: state.workspaceId,
      amountCents: charge.amountCents,
      status: paid ? 'paid' : 'failed',
      paymentId: charge.paymentId,
      at,
    });
  };
  if (!result.ok) {
    await ctx.writer.write(async (tx) => {
      await rows(tx, false);
      await disableAutoRecharge(tx, state.workspaceId);
    });
    state.wallet = { ...state.wallet, autoRecharge: { ...state.wallet.autoRecharge, enabled: false } };
    return { state };
  }
  await commitMoney(state, ctx, deposit(state.account, charge.amountCents, `dep:${charge.depositId}`), at, (tx) => rows(tx, true));
  return { state };
}

/** Writes a money decision with its companion rows in one transaction, then makes it the actor's state. */
async function commitMoney(
  state: WorkspaceState,
  ctx: ActorContext,
  money: MoneyDecision,
  at: Date,
  also: (tx: Transaction) => Promise<unknown>,
): Promise<void> {
  if (!money.ok) throw new Error(money.message);
  const activates = money.account.walletActivated && !state.account.walletActivated;
  await ctx.writer.write(async (tx) => {
    await also(tx);
    await writeMoney(tx, state.workspaceId, money.entries, at);
    if (activates) await activateWallet(tx, state.workspaceId);
  });
  // Other messages may not run while this one awaits its commit, so the decision is still based on the current account.
  state.account = { ...money.account, reservations: state.account.reservations };
}

function changePlan(state: WorkspaceState, plan: string, ctx: ActorContext): void {
  state.plan = depsOf(ctx).catalog.plan(plan);
  depsOf(ctx).billing.planChanged(state.workspaceId);
  ctx.actors.tell('ws', state.workspaceId, { type: 'schedule' });
}

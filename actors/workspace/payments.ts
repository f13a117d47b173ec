import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Outcome } from '../../runtime/actor-behavior.ts';
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { ActorContext } from '../kinds.ts';
import { newId } from '../../persistence/ids.ts';
import { depsOf } from '../deps.ts';
import { addMonth, nextPeriodEnd, periodGrantReference } from '../billing/period.ts';
import type { ProviderEvent } from '../billing/provider.ts';
import { checkWalletSettings, deposit, grant, needsAutoRecharge, spendAt, type MoneyDecision, type WalletSettings } from './account.ts';
import type { PaymentEventReply, RenewReply, SubscriptionRow, WalletSettingsPatch, WalletSnapshot } from './protocol.ts';
import { writeMoney } from './money-writes.ts';
import type { WorkspaceState } from './state.ts';

/**
 * The workspace actor's payment messages: provider events, subscription renewals and cancellation, wallet
 * settings and auto-recharge. Each awaits its own commit before the actor takes its next message, so what
 * it reads from the database (is this payment still pending? was this event seen?) stays true until it
 * has written; the ledger's unique references are the last guard against applying anything twice.
 */

interface PaymentRow {
  id: string;
  workspace_id: string;
  provider: string;
  purpose: 'subscription' | 'credit_top_up' | 'wallet_deposit';
  order_id: string;
  plan: string | null;
  amount_cents: number;
  status: string;
}

async function recordEvent(em: SqlEntityManager, provider: string, event: ProviderEvent, workspaceId: string, applied: boolean, at: Date): Promise<void> {
  await em.execute(
    `insert into billing_events (id, provider, type, payment_id, workspace_id, applied, received_at) values (?, ?, ?, ?, ?, ?, ?)
     on conflict (id) do nothing`,
    [event.id, provider, event.type, event.paymentId, workspaceId, applied, at],
    'run',
  );
}

export async function applyPaymentEvent(
  state: WorkspaceState,
  provider: string,
  event: ProviderEvent,
  ctx: ActorContext,
): Promise<Outcome<WorkspaceState, PaymentEventReply>> {
  const em = ctx.db.em();
  const at = new Date(ctx.clock.now());
  const seen = await em.execute<Array<{ id: string }>>('select id from billing_events where id = ?', [event.id]);
  if (seen.length > 0) return { state, reply: { applied: false, reason: 'duplicate event' } };
  const [payment] = await em.execute<PaymentRow[]>('select * from payments where id = ? and workspace_id = ?', [event.paymentId, state.workspaceId]);
  if (!payment || payment.provider !== provider || payment.status !== 'pending') {
    await ctx.writer.write((em) => recordEvent(em, provider, event, state.workspaceId, false, at));
    return { state, reply: { applied: false, reason: payment ? `payment already ${payment.status}` : 'unknown payment' } };
  }

  if (event.type === 'payment.failed') {
    await ctx.writer.write(async (em) => {
      await recordEvent(em, provider, event, state.workspaceId, true, at);
      await settlePayment(em, payment.id, 'failed', at, event.failureReason ?? 'declined');
      if (payment.purpose === 'credit_top_up')
        await em.execute(`update credit_top_ups set status = 'failed', completed_at = ? where id = ? and status = 'pending'`, [at, payment.order_id], 'run');
      if (payment.purpose === 'wallet_deposit')
        await em.execute(`update wallet_deposits set status = 'failed', completed_at = ? where id = ? and status = 'pending'`, [at, payment.order_id], 'run');
    });
    return { state, reply: { applied: true } };
  }

  switch (payment.purpose) {
    case 'credit_top_up': {
      const [order] = await em.execute<Array<{ id: string; credits: number }>>('select id, credits from credit_top_ups where id = ?', [payment.order_id]);
      if (!order) throw new Error(`payment ${payment.id} pays a missing top-up ${payment.order_id}`);
      const money = grant(state.account, Number(order.credits), `top:${order.id}`);
      await commitMoney(state, ctx, money, at, async (em) => {
        await recordEvent(em, provider, event, state.workspaceId, true, at);
        await settlePayment(em, payment.id, 'succeeded', at);
        await em.execute(`update credit_top_ups set status = 'paid', completed_at = ? where id = ?`, [at, order.id], 'run');
      });
      return { state, reply: { applied: true } };
    }
    case 'wallet_deposit': {
      const money = deposit(state.account, Number(payment.amount_cents), `dep:${payment.order_id}`);
      await commitMoney(state, ctx, money, at, async (em) => {
        await recordEvent(em, provider, event, state.workspaceId, true, at);
        await settlePayment(em, payment.id, 'succeeded', at);
        await em.execute(`update wallet_deposits set status = 'paid', completed_at = ? where id = ?`, [at, payment.order_id], 'run');
      });
      return { state, reply: { applied: true } };
    }
    case 'subscription': {
      const plan = depsOf(ctx).catalog.plan(payment.plan ?? depsOf(ctx).catalog.defaultPlan().id);
      const subscriptionId = payment.order_id;
      const start = at.getTime();
      const end = addMonth(start);
      const money = grant(state.account, plan.monthlyCredits, periodGrantReference(subscriptionId, start));
      await commitMoney(state, ctx, money, at, async (em) => {
        await recordEvent(em, provider, event, state.workspaceId, true, at);
        await settlePayment(em, payment.id, 'succeeded', at);
        // A new plan starts a new period at once; the subscription it replaces ends now (no proration).
        await em.execute(
          `update subscriptions set status = 'replaced', ended_at = ?, updated_at = ? where workspace_id = ? and status = 'active'`,
          [at, at, state.workspaceId],
          'run',
        );
        await em.execute(
          `insert into subscriptions (id, workspace_id, plan, status, current_period_start, current_period_end, cancel_at_period_end, created_at, updated_at)
           values (?, ?, ?, 'active', ?, ?, false, ?, ?)`,
          [subscriptionId, state.workspaceId, plan.id, at, new Date(end), at, at],
          'run',
        );
        await em.execute('update workspaces set plan = ?, updated_at = ? where id = ?', [plan.id, at, state.workspaceId], 'run');
      });
      changePlan(state, plan.id, ctx);
      depsOf(ctx).billing.renewals.schedule(state.workspaceId, subscriptionId, end);
      return { state, reply: { applied: true } };
    }
  }
}

/** Renews a subscription whose period has ended, or ends it (cancelled at period end, or the renewal charge declined). */
export async function renewSubscription(state: WorkspaceState, subscriptionId: string, ctx: ActorContext): Promise<Outcome<WorkspaceState, RenewReply>> {
  const em = ctx.db.em();
  const now = ctx.clock.now();
  const at = new Date(now);
  const [sub] = await em.execute<
    Array<{ id: string; plan: string; status: string; current_period_end: Date | string; cancel_at_period_end: boolean; created_at: Date | string }>
  >('select id, plan, status, current_period_end, cancel_at_period_end, created_at from subscriptions where id = ? and workspace_id = ?', [
    subscriptionId,
    state.workspaceId,
  ]);
  if (sub?.status !== 'active') return { state, reply: { nextAt: null } };
  const end = new Date(sub.current_period_end).getTime();
  if (now < end) return { state, reply: { nextAt: end } };

  const endTo = async (status: 'canceled' | 'past_due') => {
    // Back to the catalog's default plan (free in the shipped one).
    const fallback = depsOf(ctx).catalog.defaultPlan().id;
    await ctx.writer.write(async (em) => {
      await em.execute(
        'update subscriptions set status = ?, ended_at = ?, updated_at = ? where id = ? and status = ?',
        [status, new Date(end), at, sub.id, 'active'],
        'run',
      );
      await em.execute('update workspaces set plan = ?, updated_at = ? where id = ?', [fallback, at, state.workspaceId], 'run');
    });
    changePlan(state, fallback, ctx);
    return { state, reply: { nextAt: null } };
  };
  if (sub.cancel_at_period_end) return endTo('canceled');

  const plan = depsOf(ctx).catalog.plan(sub.plan);
  const paymentId = newId('pay', now);
  const description = `${plan.name} plan, period from ${new Date(end).toISOString().slice(0, 10)}`;
  const provider = depsOf(ctx).billing.provider;
  const charge = await provider.chargeSaved({ paymentId, workspaceId: state.workspaceId, amountCents: plan.monthlyPriceCents, description });
  const insertPayment = (em: SqlEntityManager, status: 'succeeded' | 'failed', reason: string | null) =>
    em.execute(
      `insert into payments (id, workspace_id, provider, purpose, order_id, plan, amount_cents, status, description, failure_reason, created_at, completed_at)
     values (?, ?, ?, 'subscription', ?, ?, ?, ?, ?, ?, ?, ?)`,
      [paymentId, state.workspaceId, provider.id, sub.id, plan.id, plan.monthlyPriceCents, status, description, reason, at, at],
      'run',
    );
  if (!charge.ok) {
    await ctx.writer.write(async (em) => {
      await insertPayment(em, 'failed', charge.reason);
    });
    return endTo('past_due');
  }
  const nextEnd = nextPeriodEnd(new Date(sub.created_at).getTime(), end);
  const money = grant(state.account, plan.monthlyCredits, periodGrantReference(sub.id, end));
  await commitMoney(state, ctx, money, at, async (em) => {
    await insertPayment(em, 'succeeded', null);
    const moved = await em.execute<Array<{ id: string }>>(
      `update subscriptions set current_period_start = ?, current_period_end = ?, updated_at = ? where id = ? and current_period_end = ? and status = 'active' returning id`,
      [new Date(end), new Date(nextEnd), at, sub.id, new Date(end)],
    );
    if (moved.length !== 1) throw new Error(`subscription ${sub.id} moved while renewing`);
  });
  return { state, reply: { nextAt: nextEnd } };
}

/** Marks the live subscription to end at its period's end; null when there is none. Asking twice changes nothing. */
export async function cancelSubscription(state: WorkspaceState, ctx: ActorContext): Promise<Outcome<WorkspaceState, SubscriptionRow | null>> {
  const at = new Date(ctx.clock.now());
  let row: SubscriptionRow | null = null;
  await ctx.writer.write(async (em) => {
    const rows = await em.execute<SubscriptionRow[]>(
      `update subscriptions set cancel_at_period_end = true, updated_at = ? where workspace_id = ? and status = 'active' returning *`,
      [at, state.workspaceId],
    );
    row = rows[0] ?? null;
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
  await ctx.writer.write(async (em) => {
    await em.execute(
      `update workspace_accounts set auto_recharge_enabled = ?, auto_recharge_threshold_cents = ?, auto_recharge_amount_cents = ?, monthly_spend_cap_cents = ?, updated_at = ?
        where workspace_id = ?`,
      [
        settings.autoRecharge.enabled,
        settings.autoRecharge.thresholdCents,
        settings.autoRecharge.amountCents,
        settings.monthlySpendCapCents,
        at,
        state.workspaceId,
      ],
      'run',
    );
  });
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

/** Charges the saved card for the configured amount and deposits it: a deposit with source auto_recharge. */
export async function autoRecharge(state: WorkspaceState, ctx: ActorContext): Promise<Outcome<WorkspaceState, NoReply>> {
  state.recharging = false;
  const settings = state.wallet.autoRecharge;
  if (!needsAutoRecharge(state.account, state.wallet, false)) return { state };
  const now = ctx.clock.now();
  const at = new Date(now);
  const depositId = newId('dep', now);
  const paymentId = newId('pay', now);
  const provider = depsOf(ctx).billing.provider;
  const description = `Wallet auto-recharge of ${settings.amountCents} cents`;
  const charge = await provider.chargeSaved({ paymentId, workspaceId: state.workspaceId, amountCents: settings.amountCents, description });
  const rows = async (em: SqlEntityManager, status: 'paid' | 'failed') => {
    await em.execute(
      `insert into payments (id, workspace_id, provider, purpose, order_id, plan, amount_cents, status, description, failure_reason, created_at, completed_at)
       values (?, ?, ?, 'wallet_deposit', ?, null, ?, ?, ?, ?, ?, ?)`,
      [
        paymentId,
        state.workspaceId,
        provider.id,
        depositId,
        settings.amountCents,
        status === 'paid' ? 'succeeded' : 'failed',
        description,
        charge.ok ? null : charge.reason,
        at,
        at,
      ],
      'run',
    );
    await em.execute(
      `insert into wallet_deposits (id, workspace_id, amount_cents, source, status, payment_id, created_at, completed_at) values (?, ?, ?, 'auto_recharge', ?, ?, ?, ?)`,
      [depositId, state.workspaceId, settings.amountCents, status, paymentId, at, at],
      'run',
    );
  };
  if (!charge.ok) {
    // A declined card turns auto-recharge off, so it is not retried on every job.
    await ctx.writer.write(async (em) => {
      await rows(em, 'failed');
      await em.execute('update workspace_accounts set auto_recharge_enabled = false where workspace_id = ?', [state.workspaceId], 'run');
    });
    state.wallet = { ...state.wallet, autoRecharge: { ...settings, enabled: false } };
    return { state };
  }
  await commitMoney(state, ctx, deposit(state.account, settings.amountCents, `dep:${depositId}`), at, (em) => rows(em, 'paid'));
  return { state };
}

/** Writes a money decision with its companion rows in one transaction, then makes it the actor's state. */
async function commitMoney(
  state: WorkspaceState,
  ctx: ActorContext,
  money: MoneyDecision,
  at: Date,
  also: (em: SqlEntityManager) => Promise<unknown>,
): Promise<void> {
  if (!money.ok) throw new Error(money.message);
  const activates = money.account.walletActivated && !state.account.walletActivated;
  await ctx.writer.write(async (em) => {
    await also(em);
    await writeMoney(em, state.workspaceId, money.entries, at);
    if (activates) await em.execute('update workspace_accounts set wallet_activated = true where workspace_id = ?', [state.workspaceId], 'run');
  });
  // Other messages may not run while this one awaits its commit, so the decision is still based on the current account.
  state.account = { ...money.account, reservations: state.account.reservations };
}

async function settlePayment(em: SqlEntityManager, paymentId: string, status: 'succeeded' | 'failed', at: Date, reason?: string): Promise<void> {
  const rows = await em.execute<Array<{ id: string }>>(
    `update payments set status = ?, completed_at = ?, failure_reason = ? where id = ? and status = 'pending' returning id`,
    [status, at, reason ?? null, paymentId],
  );
  if (rows.length !== 1) throw new Error(`payment ${paymentId} is not pending`);
}

function changePlan(state: WorkspaceState, plan: string, ctx: ActorContext): void {
  state.plan = depsOf(ctx).catalog.plan(plan);
  depsOf(ctx).billing.planChanged(state.workspaceId);
  ctx.actors.tell('ws', state.workspaceId, { type: 'schedule' });
}

import t from 'tap';
import { emptyAccount } from '../../domain/account.ts';
import { addMonth, addMonths, periodGrantReference } from '../../actors/billing/period.ts';
import type { ProviderEvent } from '../../actors/billing/provider.ts';
import { decidePaymentEvent } from '../../actors/workspace/decide-payment-event.ts';
import { decideAutoRecharge, decideRechargeCharged, rechargeChargeKey } from '../../actors/workspace/decide-recharge.ts';
import { decideRenewal, decideRenewalCharged, RENEWAL_RETRY_MS, renewalChargeKey, type RenewalLookups } from '../../actors/workspace/decide-renewal.ts';
import { decideWalletSettings, walletSnapshotOf } from '../../actors/workspace/decide-wallet.ts';
import type { PaymentStatement, WorkspaceEffect } from '../../actors/workspace/decision.ts';
import type { RechargeCharge, RenewalCharge } from '../../actors/workspace/protocol.ts';
import type { PaymentRow, SubscriptionRow } from '../../persistence/stores/payment-outcomes.ts';
import { NOW, planOf, stateOf, WS } from './workspace-fixtures.ts';

/*
 * The workspace actor's payment deciders on their own (actors/workspace/decide-payment-event.ts,
 * decide-renewal.ts, decide-recharge.ts, decide-wallet.ts): what each commits, in which transaction, with which
 * money, and what it does once committed. No database, no payment provider.
 */

type Commit = Extract<WorkspaceEffect, { type: 'commit' }>;
const at = new Date(NOW);
const kindsOf = (statements: PaymentStatement[]) => statements.map((s) => s.kind);

function paymentOf(patch: Partial<PaymentRow> = {}): PaymentRow {
  return {
    id: 'pay_1',
    workspace_id: WS,
    provider: 'fake',
    purpose: 'credit_top_up',
    order_id: 'top_1',
    plan: null,
    amount_cents: 1_500,
    status: 'pending',
    ...patch,
  };
}
const succeeded: ProviderEvent = { id: 'evt_1', type: 'payment.succeeded', paymentId: 'pay_1', createdAt: NOW };
const failedEvent: ProviderEvent = { id: 'evt_2', type: 'payment.failed', paymentId: 'pay_1', createdAt: NOW };

t.test('a payment event', async (t) => {
  t.test('seen before: nothing written', async (t) => {
    const state = stateOf();
    t.same(decidePaymentEvent(state, 'fake', succeeded, { seen: true }, NOW), { state, reply: { applied: false, reason: 'duplicate event' }, effects: [] });
  });

  t.test('about no pending payment of this provider: recorded as not applied', async (t) => {
    for (const [payment, reason] of [
      [undefined, 'unknown payment'],
      [paymentOf({ status: 'succeeded' }), 'payment already succeeded'],
      [paymentOf({ provider: 'other' }), 'payment already pending'],
    ] as const) {
      const state = stateOf();
      const { reply, effects } = decidePaymentEvent(state, 'fake', succeeded, { seen: false, payment }, NOW);
      t.same(reply, { applied: false, reason });
      t.same(effects, [
        {
          type: 'commit',
          statements: [{ kind: 'record_billing_event', id: 'evt_1', provider: 'fake', eventType: 'payment.succeeded', paymentId: 'pay_1', applied: false, at }],
        },
      ]);
      t.equal(state.account.availableCredits, 100, 'no money');
    }
  });

  t.test('failed: the payment and its order failed, no money', async (t) => {
    const state = stateOf();
    const { reply, effects } = decidePaymentEvent(state, 'fake', failedEvent, { seen: false, payment: paymentOf() }, NOW);
    t.same(reply, { applied: true });
    const commit = effects[0] as Commit;
    t.same(effects.length, 1);
    t.equal(commit.money, undefined);
    t.same(commit.statements.slice(1), [
      { kind: 'settle_payment', paymentId: 'pay_1', status: 'failed', at, failureReason: 'declined' },
      { kind: 'settle_order', purpose: 'credit_top_up', orderId: 'top_1', status: 'failed', at },
    ]);
    const sub = decidePaymentEvent(
      stateOf(),
      'fake',
      { ...failedEvent, failureReason: 'expired card' },
      { seen: false, payment: paymentOf({ purpose: 'subscription' }) },
      NOW,
    );
    t.same(kindsOf((sub.effects[0] as Commit).statements), ['record_billing_event', 'settle_payment'], 'a subscription has no order to fail');
    t.match((sub.effects[0] as Commit).statements[1], { failureReason: 'expired card' });
  });

  t.test("a top-up: its credits granted in the payment's transaction", async (t) => {
    const state = stateOf();
    const { effects } = decidePaymentEvent(state, 'fake', succeeded, { seen: false, payment: paymentOf(), topUp: { id: 'top_1', credits: 500 } }, NOW);
    t.equal(state.account.availableCredits, 600);
    const commit = effects[0] as Commit;
    t.same(kindsOf(commit.statements), ['record_billing_event', 'settle_payment', 'settle_order']);
    t.match(commit.statements[2], { purpose: 'credit_top_up', orderId: 'top_1', status: 'paid' });
    t.same(commit.money, {
      entries: [{ kind: 'grant', credits: 500, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, reference: 'top:top_1' }],
      at,
      activatesWallet: false,
    });
    t.throws(() => decidePaymentEvent(stateOf(), 'fake', succeeded, { seen: false, payment: paymentOf() }, NOW), /missing top-up/);
  });

  t.test('a wallet deposit: its cents, activating the wallet from the minimum', async (t) => {
    const state = stateOf({ account: emptyAccount() });
    const { effects } = decidePaymentEvent(
      state,
      'fake',
      succeeded,
      { seen: false, payment: paymentOf({ purpose: 'wallet_deposit', order_id: 'dep_1' }) },
      NOW,
    );
    t.same([state.account.walletCents, state.account.walletActivated], [1_500, true]);
    const commit = effects[0] as Commit;
    t.equal(commit.money?.activatesWallet, true);
    t.equal(commit.money?.entries[0]?.reference, 'dep:dep_1');
    const small = stateOf({ account: emptyAccount() });
    const under = decidePaymentEvent(small, 'fake', succeeded, { seen: false, payment: paymentOf({ purpose: 'wallet_deposit', amount_cents: 999 }) }, NOW);
    t.equal((under.effects[0] as Commit).money?.activatesWallet, false, 'under the minimum: not activated');
    const active = stateOf({ account: { ...emptyAccount(), walletActivated: true } });
    const again = decidePaymentEvent(active, 'fake', succeeded, { seen: false, payment: paymentOf({ purpose: 'wallet_deposit' }) }, NOW);
    t.equal((again.effects[0] as Commit).money?.activatesWallet, false, 'active already: not activated again');
  });

  t.test("a subscription: its first period's credits, the plan changed once committed, its renewal scheduled", async (t) => {
    const state = stateOf({ plan: planOf({ id: 'free', name: 'Free' }) });
    const team = planOf({ id: 'team', name: 'Team', monthlyCredits: 5_000 });
    const payment = paymentOf({ purpose: 'subscription', order_id: 'sub_1', plan: 'team' });
    const { effects } = decidePaymentEvent(state, 'fake', succeeded, { seen: false, payment, plan: team }, NOW);
    const end = addMonth(NOW);
    t.same(
      effects.map((e) => e.type),
      ['commit', 'plan_changed', 'tell_self', 'schedule_renewal'],
    );
    const commit = effects[0] as Commit;
    t.same(commit.statements[2], { kind: 'start_subscription', id: 'sub_1', plan: 'team', periodEnd: new Date(end), at });
    t.equal(commit.money?.entries[0]?.reference, periodGrantReference('sub_1', NOW));
    t.equal(state.account.availableCredits, 5_100);
    t.equal(state.plan, team);
    t.same(effects.slice(2), [
      { type: 'tell_self', msg: { type: 'schedule' } },
      { type: 'schedule_renewal', subscriptionId: 'sub_1', at: end },
    ]);
  });
});

function subscriptionOf(patch: Partial<SubscriptionRow> = {}): SubscriptionRow {
  return {
    id: 'sub_1',
    workspace_id: WS,
    plan: 'team',
    status: 'active',
    current_period_start: new Date(addMonths(NOW, -1)),
    current_period_end: new Date(NOW),
    cancel_at_period_end: false,
    ended_at: null,
    // Started a month before its period ends: the next period ends a month after.
    created_at: new Date(addMonths(NOW, -1)),
    ...patch,
  };
}

t.test('a renewal', async (t) => {
  const free = planOf({ id: 'free', name: 'Free', monthlyCredits: 100 });
  const team = planOf({ id: 'team', name: 'Team', monthlyPriceCents: 4_900, monthlyCredits: 5_000 });
  const lookups = (patch: Partial<RenewalLookups> = {}): RenewalLookups => ({
    underWay: false,
    subscription: subscriptionOf(),
    plan: team,
    fallback: free,
    paymentId: 'pay_9',
    ...patch,
  });

  t.test('nothing to do: a charge under way, no active subscription, its period not over', async (t) => {
    t.same(decideRenewal(stateOf(), 'sub_1', lookups({ underWay: true }), NOW).reply, { nextAt: null });
    t.same(decideRenewal(stateOf(), 'sub_1', lookups({ subscription: subscriptionOf({ status: 'canceled' }) }), NOW).effects, []);
    const early = decideRenewal(stateOf(), 'sub_1', lookups(), NOW - 1);
    t.same([early.reply, early.effects], [{ nextAt: NOW }, []]);
  });

  t.test('set to end: ended, the workspace back on the default plan', async (t) => {
    const state = stateOf({ plan: team });
    const { reply, effects } = decideRenewal(state, 'sub_1', lookups({ subscription: subscriptionOf({ cancel_at_period_end: true }) }), NOW + 5);
    t.same(reply, { nextAt: null });
    t.same(effects, [
      {
        type: 'commit',
        statements: [{ kind: 'end_subscription', id: 'sub_1', status: 'canceled', endedAt: new Date(NOW), fallbackPlan: 'free', at: new Date(NOW + 5) }],
      },
      { type: 'plan_changed' },
      { type: 'tell_self', msg: { type: 'schedule' } },
    ]);
    t.equal(state.plan, free);
  });

  t.test('due: the saved card charged beside the mailbox, marked under way', async (t) => {
    const state = stateOf();
    const { reply, effects } = decideRenewal(state, 'sub_1', lookups(), NOW);
    t.same(reply, { nextAt: null }, 'the charge schedules the next renewal');
    t.same(effects[0], { type: 'charge_under_way', key: renewalChargeKey(WS, 'sub_1') });
    t.same(effects[1], {
      type: 'charge_saved_card',
      purpose: 'renewal',
      charge: {
        paymentId: 'pay_9',
        subscriptionId: 'sub_1',
        plan: 'team',
        amountCents: 4_900,
        description: `Team plan, period from ${new Date(NOW).toISOString().slice(0, 10)}`,
        periodEnd: NOW,
        nextEnd: addMonth(NOW),
        at: NOW,
      },
    });
    t.equal(state.account.availableCredits, 100, 'nothing granted before the charge succeeds');
  });

  const charge: RenewalCharge = {
    paymentId: 'pay_9',
    subscriptionId: 'sub_1',
    plan: 'team',
    amountCents: 4_900,
    description: 'Team plan',
    periodEnd: NOW,
    nextEnd: addMonth(NOW),
    at: NOW,
  };
  const facts = { provider: 'fake', plan: team, fallback: free };

  t.test('its charge got no answer: tried again in a minute', async (t) => {
    const { effects } = decideRenewalCharged(stateOf(), charge, null, 'timeout', facts, NOW + 10);
    t.same(
      effects.map((e) => e.type),
      ['charge_done', 'log', 'schedule_renewal'],
    );
    t.same(effects[0], { type: 'charge_done', key: renewalChargeKey(WS, 'sub_1') });
    t.same(effects[2], { type: 'schedule_renewal', subscriptionId: 'sub_1', at: NOW + 10 + RENEWAL_RETRY_MS });
  });

  t.test('declined: its payment recorded failed and the subscription ended past due, in one transaction', async (t) => {
    const state = stateOf({ plan: team });
    const { effects } = decideRenewalCharged(state, charge, { ok: false, reason: 'card_declined' }, undefined, facts, NOW + 10);
    const commit = effects[1] as Commit;
    t.same(kindsOf(commit.statements), ['insert_saved_card_payment', 'end_subscription']);
    t.match(commit.statements[0], { payment: { id: 'pay_9', status: 'failed', failureReason: 'card_declined', purpose: 'subscription', provider: 'fake' } });
    t.match(commit.statements[1], { status: 'past_due', endedAt: new Date(NOW), fallbackPlan: 'free' });
    t.equal(state.plan, free);
  });

  t.test('paid: its payment and the period granted, the period advanced if still the same', async (t) => {
    const state = stateOf();
    const { effects } = decideRenewalCharged(state, charge, { ok: true, reference: 'ch_1' }, undefined, facts, NOW + 10);
    const commit = effects[1] as Commit;
    t.same(kindsOf(commit.statements), ['insert_saved_card_payment', 'advance_subscription']);
    t.match(commit.statements[0], { payment: { status: 'succeeded', failureReason: null } });
    t.equal(commit.money?.entries[0]?.reference, periodGrantReference('sub_1', NOW));
    t.equal(state.account.availableCredits, 5_100);
    const advance = commit.statements[1] as Extract<PaymentStatement, { kind: 'advance_subscription' }>;
    t.same([advance.periodEnd, advance.nextEnd], [new Date(NOW), new Date(addMonth(NOW))]);
    t.same(advance.ifAdvanced, [{ type: 'schedule_renewal', subscriptionId: 'sub_1', at: addMonth(NOW) }]);
    t.match(advance.ifMoved, [{ type: 'log', level: 'warn' }]);
  });
});

t.test('auto-recharge', async (t) => {
  const wallet = { autoRecharge: { enabled: true, thresholdCents: 500, amountCents: 2_000 }, monthlySpendCapCents: null };
  const low = () => stateOf({ account: { ...emptyAccount(), walletActivated: true, walletCents: 100 }, wallet, recharging: true });
  const looked = { underWay: false, paymentId: 'pay_r', depositId: 'dep_r' };

  t.test('one under way already: nothing', async (t) => {
    const state = low();
    t.same(decideAutoRecharge(state, { ...looked, underWay: true }, NOW).effects, []);
    t.equal(state.recharging, true, 'its result ends it');
  });

  t.test('no longer needed: nothing, and none under way', async (t) => {
    const state = stateOf({ wallet, recharging: true });
    t.same(decideAutoRecharge(state, looked, NOW).effects, []);
    t.equal(state.recharging, false);
  });

  t.test('needed: the card charged for the configured amount', async (t) => {
    const state = low();
    const { effects } = decideAutoRecharge(state, looked, NOW);
    t.same(effects, [
      { type: 'charge_under_way', key: rechargeChargeKey(WS) },
      {
        type: 'charge_saved_card',
        purpose: 'recharge',
        charge: { paymentId: 'pay_r', depositId: 'dep_r', amountCents: 2_000, description: 'Wallet auto-recharge of 2000 cents', at: NOW },
      },
    ]);
  });

  const charge: RechargeCharge = { paymentId: 'pay_r', depositId: 'dep_r', amountCents: 2_000, description: 'Wallet auto-recharge of 2000 cents', at: NOW };

  t.test('its charge came back', async (t) => {
    const none = low();
    t.same(decideRechargeCharged(none, charge, null, 'fake', NOW).effects, [{ type: 'charge_done', key: rechargeChargeKey(WS) }], 'no answer: nothing written');
    t.equal(none.recharging, false);

    const declined = low();
    const d = decideRechargeCharged(declined, charge, { ok: false, reason: 'card_declined' }, 'fake', NOW);
    const failed = d.effects[1] as Commit;
    t.same(kindsOf(failed.statements), ['insert_saved_card_payment', 'insert_auto_recharge_deposit', 'disable_auto_recharge']);
    t.equal(failed.money, undefined);
    t.match(failed.statements[1], { id: 'dep_r', status: 'failed', paymentId: 'pay_r' });
    t.equal(declined.wallet.autoRecharge.enabled, false, 'turned off, not retried on every job');

    const paid = low();
    const p = decideRechargeCharged(paid, charge, { ok: true, reference: 'ch_1' }, 'fake', NOW);
    const deposited = p.effects[1] as Commit;
    t.same(kindsOf(deposited.statements), ['insert_saved_card_payment', 'insert_auto_recharge_deposit']);
    t.match(deposited.statements[0], { payment: { purpose: 'wallet_deposit', orderId: 'dep_r', status: 'succeeded' } });
    t.same(
      deposited.money?.entries.map((e) => [e.kind, e.walletCents, e.reference]),
      [['deposit', 2_000, 'dep:dep_r']],
    );
    t.equal(paid.account.walletCents, 2_100);
    t.equal(paid.wallet.autoRecharge.enabled, true);
  });
});

t.test('wallet settings: merged, refused when they do not hold together, written, and a recharge started when low', async (t) => {
  const state = stateOf({ account: { ...emptyAccount(), walletActivated: true, walletCents: 100 } });
  const refused = decideWalletSettings(state, { autoRecharge: { enabled: true, amountCents: 10 } }, NOW);
  t.match(refused.reply, { refused: /at least 1000 cents/ });
  t.same(refused.effects, []);
  t.equal(state.wallet.autoRecharge.enabled, false, 'unchanged');

  const { reply, effects } = decideWalletSettings(state, { autoRecharge: { enabled: true, amountCents: 2_000, thresholdCents: 500 } }, NOW);
  const settings = { autoRecharge: { enabled: true, amountCents: 2_000, thresholdCents: 500 }, monthlySpendCapCents: null };
  t.same(effects, [
    { type: 'commit', statements: [{ kind: 'write_wallet_settings', settings, at }] },
    { type: 'tell_self', msg: { type: 'auto_recharge' } },
  ]);
  t.same(reply, walletSnapshotOf(state, NOW));
  t.match(reply, { settings, autoRechargeUnderWay: true, balanceCents: 100 });

  const capped = decideWalletSettings(state, { monthlySpendCapCents: 5_000 }, NOW);
  t.same(
    (capped.effects[0] as Commit).statements,
    [{ kind: 'write_wallet_settings', settings: { ...settings, monthlySpendCapCents: 5_000 }, at }],
    'a partial patch keeps the rest',
  );
  t.same(capped.effects.length, 1, 'one recharge at a time');
  const kept = decideWalletSettings(state, { autoRecharge: { thresholdCents: 400 } }, NOW);
  t.same(
    (kept.effects[0] as Commit).statements,
    [{ kind: 'write_wallet_settings', settings: { autoRecharge: { ...settings.autoRecharge, thresholdCents: 400 }, monthlySpendCapCents: 5_000 }, at }],
    'the cap left out of the patch is kept',
  );
});

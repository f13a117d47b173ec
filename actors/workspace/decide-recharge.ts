/**
 * The wallet's automatic deposits, as pure decisions (decision.ts): started when a job leaves the wallet under
 * its threshold, one at a time per workspace; the saved card charged beside the mailbox; its result deposited,
 * or (declined) recorded with auto-recharge turned off.
 */
import { deposit, needsAutoRecharge } from '../../domain/account.ts';
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { SavedCardPayment } from '../../persistence/stores/payment-outcomes.ts';
import type { ChargeResult } from '../billing/provider.ts';
import { moneyCommit } from './decide-commit.ts';
import type { Decision, PaymentStatement, WorkspaceEffect } from './decision.ts';
import type { RechargeCharge } from './protocol.ts';
import type { WorkspaceState } from './state.ts';

/** The entry of a workspace's auto-recharge charge under way in BillingDeps.charges. */
export const rechargeChargeKey = (workspaceId: string) => `recharge:${workspaceId}`;

/**
 * Starts an automatic deposit when the wallet fell under its threshold, one at a time: the actor tells itself
 * `auto_recharge`.
 */
export function rechargeIfLow(state: WorkspaceState, effects: WorkspaceEffect[]): void {
  if (!needsAutoRecharge(state.account, state.wallet, state.recharging)) return;
  state.recharging = true;
  effects.push({ type: 'tell_self', msg: { type: 'auto_recharge' } });
}

/** What the actor read or made before deciding an auto-recharge. */
export interface RechargeLookups {
  /** A charge of this workspace's is under way on this node (the state may have been reloaded since it started). */
  underWay: boolean;
  paymentId: string;
  depositId: string;
}

/**
 * `auto_recharge`: the saved card charged for the configured amount, beside the mailbox; `recharge_charged`
 * deposits it. One under way already: its result ends `recharging`. No longer needed: nothing.
 */
export function decideAutoRecharge<S extends WorkspaceState>(state: S, looked: RechargeLookups, now: number): Decision<S, NoReply> {
  if (looked.underWay) return { state, reply: undefined, effects: [] };
  if (!needsAutoRecharge(state.account, state.wallet, false)) {
    state.recharging = false;
    return { state, reply: undefined, effects: [] };
  }
  const { amountCents } = state.wallet.autoRecharge;
  const charge: RechargeCharge = {
    paymentId: looked.paymentId,
    depositId: looked.depositId,
    amountCents,
    description: `Wallet auto-recharge of ${amountCents} cents`,
    at: now,
  };
  state.recharging = true;
  return {
    state,
    reply: undefined,
    effects: [
      { type: 'charge_under_way', key: rechargeChargeKey(state.workspaceId) },
      { type: 'charge_saved_card', purpose: 'recharge', charge },
    ],
  };
}

/**
 * `recharge_charged`: deposited (a deposit with source auto_recharge, its payment with it), or declined:
 * recorded as failed with auto-recharge turned off, so it is not retried on every job. A charge that got no
 * answer writes nothing; the next job that leaves the wallet under its threshold tries again.
 */
export function decideRechargeCharged<S extends WorkspaceState>(
  state: S,
  charge: RechargeCharge,
  result: ChargeResult | null,
  provider: string,
  now: number,
): Decision<S, NoReply> {
  const effects: WorkspaceEffect[] = [{ type: 'charge_done', key: rechargeChargeKey(state.workspaceId) }];
  state.recharging = false;
  if (!result) return { state, reply: undefined, effects };
  const at = new Date(now);
  const rows = (paid: boolean): PaymentStatement[] => {
    const payment: SavedCardPayment = {
      id: charge.paymentId,
      workspaceId: state.workspaceId,
      provider,
      purpose: 'wallet_deposit',
      orderId: charge.depositId,
      plan: null,
      amountCents: charge.amountCents,
      status: paid ? 'succeeded' : 'failed',
      description: charge.description,
      failureReason: result.ok ? null : result.reason,
      at,
    };
    return [
      { kind: 'insert_saved_card_payment', payment },
      {
        kind: 'insert_auto_recharge_deposit',
        id: charge.depositId,
        amountCents: charge.amountCents,
        status: paid ? 'paid' : 'failed',
        paymentId: charge.paymentId,
        at,
      },
    ];
  };
  if (!result.ok) {
    effects.push({ type: 'commit', statements: [...rows(false), { kind: 'disable_auto_recharge' }] });
    state.wallet = { ...state.wallet, autoRecharge: { ...state.wallet.autoRecharge, enabled: false } };
    return { state, reply: undefined, effects };
  }
  effects.push(moneyCommit(state, deposit(state.account, charge.amountCents, `dep:${charge.depositId}`), at, rows(true)));
  return { state, reply: undefined, effects };
}

/**
 * What the payment deciders share (decision.ts): a money decision committed with its companion rows, and a
 * change of the workspace's plan.
 */
import type { MoneyDecision } from '../../domain/account.ts';
import type { PlanEntitlements } from '../../domain/plans.ts';
import type { PaymentStatement, WorkspaceEffect } from './decision.ts';
import type { WorkspaceState } from './state.ts';

/**
 * A money decision written with `statements` in one transaction of its own (the `commit` effect), the wallet
 * activated when a deposit activates it. The account is the decision's from now: a commit that fails crashes
 * the actor, which reloads what did commit. Throws on a refused decision (a grant or deposit never is).
 */
export function moneyCommit(state: WorkspaceState, money: MoneyDecision, at: Date, statements: PaymentStatement[]): WorkspaceEffect {
  if (!money.ok) throw new Error(money.message);
  const activatesWallet = money.account.walletActivated && !state.account.walletActivated;
  state.account = { ...money.account, reservations: state.account.reservations };
  return { type: 'commit', statements, money: { entries: money.entries, at, activatesWallet } };
}

/**
 * The workspace is on `plan` once the commit before these effects is done: the caches that carry its plan are
 * told, and it schedules again under the new plan's limits.
 */
export function changePlan(state: WorkspaceState, plan: PlanEntitlements, effects: WorkspaceEffect[]): void {
  state.plan = plan;
  effects.push({ type: 'plan_changed' }, { type: 'tell_self', msg: { type: 'schedule' } });
}

/** The wallet's settings and what it shows, as pure decisions (decision.ts). */
import { checkWalletSettings, spendAt, type WalletSettings } from '../../domain/account.ts';
import { rechargeIfLow } from './decide-recharge.ts';
import type { Decision, WorkspaceEffect } from './decision.ts';
import type { WalletSettingsPatch, WalletSnapshot } from './protocol.ts';
import type { WorkspaceState } from './state.ts';

/** `wallet`: the balance, what is reserved, the settings, this month's spend, and whether a deposit is on its way. */
export function walletSnapshotOf(state: WorkspaceState, now: number): WalletSnapshot {
  return {
    balanceCents: state.account.walletCents,
    reservedCents: state.account.reservedWalletCents,
    activated: state.account.walletActivated,
    settings: state.wallet,
    monthlySpend: spendAt(state.spend, now),
    autoRechargeUnderWay: state.recharging,
  };
}

/**
 * `wallet_settings`: merged here, one message at a time, so concurrent partial updates do not undo each other;
 * refused when they do not hold together, else written, and an auto-recharge started if the wallet is under
 * the new threshold.
 */
export function decideWalletSettings<S extends WorkspaceState>(
  state: S,
  patch: WalletSettingsPatch,
  now: number,
): Decision<S, WalletSnapshot | { refused: string }> {
  const settings: WalletSettings = {
    autoRecharge: { ...state.wallet.autoRecharge, ...patch.autoRecharge },
    monthlySpendCapCents: patch.monthlySpendCapCents === undefined ? state.wallet.monthlySpendCapCents : patch.monthlySpendCapCents,
  };
  const problem = checkWalletSettings(settings);
  if (problem) return { state, reply: { refused: problem }, effects: [] };
  const effects: WorkspaceEffect[] = [{ type: 'commit', statements: [{ kind: 'write_wallet_settings', settings, at: new Date(now) }] }];
  state.wallet = settings;
  rechargeIfLow(state, effects);
  return { state, reply: walletSnapshotOf(state, now), effects };
}

/**
 * Budget alerts as data and pure rules (docs/money.md, Budget alerts): which thresholds a workspace's
 * figures have crossed, and in which period. A crossing is named by (kind, subject, threshold, period);
 * the service emits its event once per name, so a new period re-arms every threshold of its kind.
 */

export type BudgetKind = 'credits_used' | 'wallet_balance' | 'key_credit_budget' | 'key_wallet_cap';
export const BUDGET_KINDS: readonly BudgetKind[] = ['credits_used', 'wallet_balance', 'key_credit_budget', 'key_wallet_cap'];

export interface BudgetSettings {
  /** Percentages (1-100) of the period's credit grant used: 80 warns once 80 % of it is gone. */
  creditsUsedPercents: number[];
  /** Wallet balances in cents: 500 warns once the balance falls below 5 dollars. */
  walletBelowCents: number[];
  /** Percentages (1-100) of each API key's credit budget and wallet spend cap used in its period. */
  keySpendPercents: number[];
}

export const MAX_THRESHOLDS = 10;

export function noBudgetSettings(): BudgetSettings {
  return { creditsUsedPercents: [], walletBelowCents: [], keySpendPercents: [] };
}

export function hasThresholds(s: BudgetSettings): boolean {
  return s.creditsUsedPercents.length + s.walletBelowCents.length + s.keySpendPercents.length > 0;
}

/** What the rules read of a workspace, at one moment. */
export interface BudgetFigures {
  /** The plan's credits per period, and what is left to spend now (reserved credits are spent). */
  grantCredits: number;
  availableCredits: number;
  /** The credit period: `sub:<subscription>:<period start>` while a subscription runs, else `month:<YYYY-MM>` (UTC). */
  creditPeriod: string;
  wallet: {
    activated: boolean;
    balanceCents: number;
    /** Re-armed by each paid deposit: `deposit:<id>` of the last one. */
    period: string;
  };
  keys: KeyFigures[];
}

export interface KeyFigures {
  keyId: string;
  name: string;
  /** `day:<YYYY-MM-DD>` or `month:<YYYY-MM-01>`, the period of the key's caps. */
  period: string;
  creditBudget: number | null;
  walletSpendCapCents: number | null;
  credits: number;
  walletCents: number;
}

export interface Crossing {
  kind: BudgetKind;
  /** '' for the workspace; the API key's id for a key's caps. */
  subject: string;
  threshold: number;
  period: string;
  /** What was seen when it was crossed, for the event and the banner. */
  details: Record<string, unknown>;
}

/** A share `used / of` reaches `percent` %, in integers (no rounding error at the threshold). */
function reached(used: number, of: number, percent: number): boolean {
  return of > 0 && used * 100 >= percent * of;
}

/** Every threshold the figures are past, in a stable order; the caller keeps the ones not emitted yet. */
export function crossedThresholds(settings: BudgetSettings, f: BudgetFigures): Crossing[] {
  const crossings: Crossing[] = [];
  const used = Math.max(0, f.grantCredits - f.availableCredits);
  for (const percent of settings.creditsUsedPercents) {
    if (!reached(used, f.grantCredits, percent)) continue;
    crossings.push({
      kind: 'credits_used',
      subject: '',
      threshold: percent,
      period: f.creditPeriod,
      details: { grantCredits: f.grantCredits, availableCredits: f.availableCredits, usedCredits: used },
    });
  }
  if (f.wallet.activated) {
    for (const cents of settings.walletBelowCents) {
      if (f.wallet.balanceCents >= cents) continue;
      crossings.push({ kind: 'wallet_balance', subject: '', threshold: cents, period: f.wallet.period, details: { balanceCents: f.wallet.balanceCents } });
    }
  }
  for (const key of f.keys) {
    for (const percent of settings.keySpendPercents) {
      if (key.creditBudget !== null && reached(key.credits, key.creditBudget, percent)) {
        crossings.push({
          kind: 'key_credit_budget',
          subject: key.keyId,
          threshold: percent,
          period: key.period,
          details: { apiKeyName: key.name, creditBudget: key.creditBudget, spentCredits: key.credits },
        });
      }
      if (key.walletSpendCapCents !== null && reached(key.walletCents, key.walletSpendCapCents, percent)) {
        crossings.push({
          kind: 'key_wallet_cap',
          subject: key.keyId,
          threshold: percent,
          period: key.period,
          details: { apiKeyName: key.name, walletSpendCapCents: key.walletSpendCapCents, spentWalletCents: key.walletCents },
        });
      }
    }
  }
  return crossings;
}

/** The period of each (kind, subject) now: a crossing of another period is of the past (re-armed since). */
export function currentPeriods(f: BudgetFigures): Map<string, string> {
  const periods = new Map<string, string>([
    ['credits_used:', f.creditPeriod],
    ['wallet_balance:', f.wallet.period],
  ]);
  for (const key of f.keys) {
    periods.set(`key_credit_budget:${key.keyId}`, key.period);
    periods.set(`key_wallet_cap:${key.keyId}`, key.period);
  }
  return periods;
}

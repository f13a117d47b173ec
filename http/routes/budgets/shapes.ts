import { Type } from '@sinclair/typebox';
import { BUDGET_KINDS, currentPeriods, type BudgetFigures, type BudgetKind } from '../../../domain/budgets.ts';
import type { StoredBudgetSettings, StoredCrossing } from '../../../persistence/budgets.ts';
import { MAX_THRESHOLDS } from '../../../domain/budgets.ts';
import { WorkspaceIdField } from '../billing/shapes.ts';

const Percents = (description: string) => Type.Array(Type.Integer({ minimum: 1, maximum: 100 }), { maxItems: MAX_THRESHOLDS, uniqueItems: true, description });
const CentsList = Type.Array(Type.Integer({ minimum: 1, maximum: 100_000_000 }), {
  maxItems: MAX_THRESHOLDS,
  uniqueItems: true,
  description: 'Wallet balances in cents: each warns once the balance falls below it (re-armed by each paid deposit).',
});

export const CREDITS_DESCRIPTION = "Percentages (1-100) of the period's credit grant used: each warns once that share of the plan's credits is gone.";
export const KEYS_DESCRIPTION = "Percentages (1-100) of each API key's credit budget and wallet spend cap used in the key's period (day or month).";

export const BudgetsPatch = Type.Object(
  {
    workspaceId: WorkspaceIdField,
    creditsUsedPercents: Type.Optional(Percents(CREDITS_DESCRIPTION)),
    walletBelowCents: Type.Optional(CentsList),
    keySpendPercents: Type.Optional(Percents(KEYS_DESCRIPTION)),
  },
  { additionalProperties: false },
);

const Kind = Type.Union(
  BUDGET_KINDS.map((k) => Type.Literal(k)),
  {
    description:
      "credits_used: of the period's credit grant; wallet_balance: the wallet below an amount; key_credit_budget and key_wallet_cap: an API key's spend against its caps.",
  },
);

export const AlertOut = Type.Object(
  {
    kind: Kind,
    apiKeyId: Type.Union([Type.String(), Type.Null()], { description: 'The key, for key_credit_budget and key_wallet_cap.' }),
    threshold: Type.Integer({ description: 'The threshold crossed: a percentage, or cents for wallet_balance.' }),
    unit: Type.Union([Type.Literal('percent'), Type.Literal('cents')]),
    period: Type.String({ description: 'The period it was crossed in; the threshold is armed again in the next one.' }),
    current: Type.Boolean({ description: 'Whether that period is still the current one (what the dashboard banner shows).' }),
    crossedAt: Type.String({ format: 'date-time' }),
    eventId: Type.String({ description: 'The budget.threshold_crossed event that announced it (GET /v1/events).' }),
    message: Type.String({ description: 'What happened, in words.' }),
    details: Type.Record(Type.String(), Type.Unknown(), { description: 'The figures seen when it was crossed (as in the event).' }),
  },
  { additionalProperties: false },
);

export const BudgetsOut = Type.Object(
  {
    workspaceId: Type.String(),
    creditsUsedPercents: Type.Array(Type.Integer(), { description: CREDITS_DESCRIPTION }),
    walletBelowCents: Type.Array(Type.Integer(), { description: 'Wallet balances in cents that warn when the balance falls below them.' }),
    keySpendPercents: Type.Array(Type.Integer(), { description: KEYS_DESCRIPTION }),
    updatedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    status: Type.Object(
      {
        creditPeriod: Type.String(),
        grantCredits: Type.Integer({ description: "The plan's credits per period." }),
        availableCredits: Type.Integer(),
        usedPercent: Type.Union([Type.Integer(), Type.Null()], { description: 'Of the grant, rounded down; null when the plan grants none.' }),
        walletBalanceCents: Type.Integer(),
      },
      { additionalProperties: false, description: 'The figures the thresholds are checked against, now.' },
    ),
    alerts: Type.Array(AlertOut, { description: 'The thresholds crossed, newest first (the last 50).' }),
  },
  { additionalProperties: false },
);

function words(kind: BudgetKind, threshold: number, d: Record<string, unknown>): string {
  switch (kind) {
    case 'credits_used':
      return `${threshold} % of this period's ${d.grantCredits} credits used (${d.availableCredits} left).`;
    case 'wallet_balance':
      return `The wallet balance fell below ${(threshold / 100).toFixed(2)} dollars (${((d.balanceCents as number) / 100).toFixed(2)} left).`;
    case 'key_credit_budget':
      return `API key "${d.apiKeyName}" used ${threshold} % of its credit budget (${d.spentCredits} of ${d.creditBudget} credits).`;
    case 'key_wallet_cap':
      return `API key "${d.apiKeyName}" used ${threshold} % of its wallet spend cap (${d.spentWalletCents} of ${d.walletSpendCapCents} cents).`;
  }
}

export function toBudgetsOut(workspaceId: string, s: StoredBudgetSettings, f: BudgetFigures | undefined, crossings: StoredCrossing[]) {
  const periods = f ? currentPeriods(f) : new Map<string, string>();
  return {
    workspaceId,
    creditsUsedPercents: s.creditsUsedPercents,
    walletBelowCents: s.walletBelowCents,
    keySpendPercents: s.keySpendPercents,
    updatedAt: s.updatedAt?.toISOString() ?? null,
    status: {
      creditPeriod: f?.creditPeriod ?? '',
      grantCredits: f?.grantCredits ?? 0,
      availableCredits: f?.availableCredits ?? 0,
      usedPercent: f && f.grantCredits > 0 ? Math.floor((Math.max(0, f.grantCredits - f.availableCredits) * 100) / f.grantCredits) : null,
      walletBalanceCents: f?.wallet.balanceCents ?? 0,
    },
    alerts: crossings.map((c) => ({
      kind: c.kind,
      apiKeyId: c.subject === '' ? null : c.subject,
      threshold: c.threshold,
      unit: c.kind === 'wallet_balance' ? ('cents' as const) : ('percent' as const),
      period: c.period,
      current: periods.get(`${c.kind}:${c.subject}`) === c.period,
      crossedAt: c.crossedAt.toISOString(),
      eventId: c.eventId,
      message: words(c.kind, c.threshold, c.details),
      details: c.details,
    })),
  };
}

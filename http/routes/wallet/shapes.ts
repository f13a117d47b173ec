import type { PlanEntitlements } from '../../../domain/plans.ts';
import { Type } from '@sinclair/typebox';
import { WALLET_MINIMUM_DEPOSIT_CENTS } from '../../../domain/account.ts';
import type { WalletSnapshot } from '../../../actors/workspace/protocol.ts';

const Cents = (description: string) => Type.Integer({ minimum: 0, description });

export const WalletSettingsOut = Type.Object(
  {
    autoRecharge: Type.Object(
      {
        enabled: Type.Boolean(),
        thresholdCents: Cents('When a job leaves the balance below this, the saved card is charged amountCents.'),
        amountCents: Cents('What each automatic deposit adds; at least 1000 when enabled.'),
      },
      { additionalProperties: false },
    ),
    monthlySpendCapCents: Type.Union([Cents('Wallet money jobs may use per UTC calendar month.'), Type.Null()], { description: 'null: no cap.' }),
  },
  { additionalProperties: false },
);

export const WalletOut = Type.Object(
  {
    workspaceId: Type.String(),
    currency: Type.Literal('usd'),
    balanceCents: Cents('Available for new jobs.'),
    reservedCents: Cents('Held by unfinished jobs paid from the wallet.'),
    activated: Type.Boolean({
      description: 'A first deposit of at least 1000 cents has cleared; wallet payments need it (422 wallet_pending_minimum before).',
    }),
    minimumDepositCents: Type.Integer(),
    centsPerCredit: Type.Integer({ description: "What one credit costs from the wallet on the workspace's plan." }),
    settings: WalletSettingsOut,
    monthlySpend: Type.Object(
      {
        month: Type.String({ description: 'YYYY-MM, UTC.' }),
        spentCents: Type.Integer({ description: 'Wallet money taken by jobs this month, less what cancelled or failed jobs gave back.' }),
      },
      { additionalProperties: false },
    ),
    autoRechargeUnderWay: Type.Boolean(),
  },
  { additionalProperties: false },
);

export function toWalletOut(workspaceId: string, plan: PlanEntitlements, wallet: WalletSnapshot) {
  return {
    workspaceId,
    currency: 'usd' as const,
    balanceCents: wallet.balanceCents,
    reservedCents: wallet.reservedCents,
    activated: wallet.activated,
    minimumDepositCents: WALLET_MINIMUM_DEPOSIT_CENTS,
    centsPerCredit: plan.centsPerCredit,
    settings: wallet.settings,
    monthlySpend: wallet.monthlySpend,
    autoRechargeUnderWay: wallet.autoRechargeUnderWay,
  };
}

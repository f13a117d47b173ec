import { describeLedgerEntry } from '../../../domain/ledger-words.ts';
import { Type } from '@sinclair/typebox';
import { iso, type Row } from './keyset.ts';

const Cents = (description: string) => Type.Integer({ description });
const When = Type.String({ format: 'date-time' });
const MaybeWhen = Type.Union([When, Type.Null()]);

export const WorkspaceIdField = Type.String({ minLength: 1, maxLength: 64 });

export const PaymentOut = Type.Object(
  {
    id: Type.String({ description: 'pay_…' }),
    workspaceId: Type.String(),
    provider: Type.String(),
    purpose: Type.Union([Type.Literal('subscription'), Type.Literal('credit_top_up'), Type.Literal('wallet_deposit')]),
    orderId: Type.String({ description: 'The subscription (sub_…), top-up (top_…) or deposit (dep_…) paid.' }),
    plan: Type.Union([Type.String(), Type.Null()]),
    amountCents: Cents('US cents.'),
    currency: Type.Literal('usd'),
    status: Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('failed')]),
    description: Type.String(),
    failureReason: Type.Union([Type.String(), Type.Null()]),
    createdAt: When,
    completedAt: MaybeWhen,
  },
  { additionalProperties: false },
);

export function toPaymentOut(row: Row) {
  return {
    id: row.id,
    workspaceId: row.workspace_id as string,
    provider: row.provider as string,
    purpose: row.purpose as 'subscription' | 'credit_top_up' | 'wallet_deposit',
    orderId: row.order_id as string,
    plan: (row.plan as string | null) ?? null,
    amountCents: Number(row.amount_cents),
    currency: 'usd' as const,
    status: row.status as 'pending' | 'succeeded' | 'failed',
    description: row.description as string,
    failureReason: (row.failure_reason as string | null) ?? null,
    createdAt: iso(row.created_at)!,
    completedAt: iso(row.completed_at),
  };
}

export const OrderStatus = Type.Union([Type.Literal('pending'), Type.Literal('paid'), Type.Literal('failed')]);

export const TopUpOut = Type.Object(
  {
    id: Type.String({ description: 'top_…' }),
    workspaceId: Type.String(),
    credits: Type.Integer({ minimum: 1 }),
    amountCents: Cents("Price in US cents: credits times the plan's cents per credit."),
    status: OrderStatus,
    paymentId: Type.String(),
    createdAt: When,
    completedAt: MaybeWhen,
  },
  { additionalProperties: false },
);

export function toTopUpOut(row: Row) {
  return {
    id: row.id,
    workspaceId: row.workspace_id as string,
    credits: Number(row.credits),
    amountCents: Number(row.amount_cents),
    status: row.status as 'pending' | 'paid' | 'failed',
    paymentId: row.payment_id as string,
    createdAt: iso(row.created_at)!,
    completedAt: iso(row.completed_at),
  };
}

export const DepositOut = Type.Object(
  {
    id: Type.String({ description: 'dep_…' }),
    workspaceId: Type.String(),
    amountCents: Cents('US cents.'),
    source: Type.Union([Type.Literal('checkout'), Type.Literal('auto_recharge')]),
    status: OrderStatus,
    paymentId: Type.String(),
    createdAt: When,
    completedAt: MaybeWhen,
  },
  { additionalProperties: false },
);

export function toDepositOut(row: Row) {
  return {
    id: row.id,
    workspaceId: row.workspace_id as string,
    amountCents: Number(row.amount_cents),
    source: row.source as 'checkout' | 'auto_recharge',
    status: row.status as 'pending' | 'paid' | 'failed',
    paymentId: row.payment_id as string,
    createdAt: iso(row.created_at)!,
    completedAt: iso(row.completed_at),
  };
}

export const CheckoutFields = {
  paymentId: Type.String(),
  checkoutUrl: Type.String({ description: "The provider's page where the payment is made (with the local provider, a page of this service)." }),
};

export const LedgerEntryOut = Type.Object(
  {
    id: Type.String({ description: 'txn_…' }),
    kind: Type.Union(['grant', 'reserve', 'capture', 'release', 'deposit'].map((k) => Type.Literal(k))),
    credits: Type.Integer({ description: 'Change of the available credits.' }),
    reservedCredits: Type.Integer({ description: 'Change of the reserved credits.' }),
    walletCents: Type.Integer({ description: 'Change of the wallet balance.' }),
    reservedWalletCents: Type.Integer({ description: 'Change of the wallet money held for running jobs.' }),
    generationId: Type.Union([Type.String(), Type.Null()]),
    reference: Type.Union([Type.String(), Type.Null()], {
      description: 'The order or grant applied: top:<id>, dep:<id>, sub:<id>:period:<start>, plan:<plan>:opening.',
    }),
    createdAt: When,
    description: Type.String({ description: 'What the entry is, in words (a hold, a charge, a give-back, a grant, a deposit).' }),
  },
  { additionalProperties: false },
);

export function toLedgerEntryOut(row: Row) {
  const entry = {
    id: row.id,
    kind: row.kind as string,
    credits: Number(row.credits),
    reservedCredits: Number(row.reserved_credits),
    walletCents: Number(row.wallet_cents),
    reservedWalletCents: Number(row.reserved_wallet_cents),
    generationId: (row.generation_id as string | null) ?? null,
    reference: (row.reference as string | null) ?? null,
    createdAt: iso(row.created_at)!,
  };
  return { ...entry, description: describeLedgerEntry(entry) };
}

export const SubscriptionOut = Type.Object(
  {
    id: Type.String({ description: 'sub_…' }),
    plan: Type.String(),
    status: Type.Union([Type.Literal('active'), Type.Literal('canceled'), Type.Literal('replaced'), Type.Literal('past_due')]),
    currentPeriodStart: When,
    currentPeriodEnd: When,
    cancelAtPeriodEnd: Type.Boolean(),
    endedAt: MaybeWhen,
    createdAt: When,
  },
  { additionalProperties: false },
);

export function toSubscriptionOut(row: Row) {
  return {
    id: row.id,
    plan: row.plan as string,
    status: row.status as 'active' | 'canceled' | 'replaced' | 'past_due',
    currentPeriodStart: iso(row.current_period_start)!,
    currentPeriodEnd: iso(row.current_period_end)!,
    cancelAtPeriodEnd: Boolean(row.cancel_at_period_end),
    endedAt: iso(row.ended_at),
    createdAt: iso(row.created_at)!,
  };
}

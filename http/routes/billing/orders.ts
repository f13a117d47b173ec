import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Services } from '../../services.ts';

export type PaymentPurpose = 'subscription' | 'credit_top_up' | 'wallet_deposit';

/**
 * A pending payment for an order (a top-up, a deposit, a plan), written in the caller's transaction with
 * its order; the provider's checkout URL is where the customer pays it. Nothing moves until the provider's
 * signed event says it was paid.
 */
export async function insertPendingPayment(
  em: SqlEntityManager,
  services: Services,
  payment: {
    id: string;
    workspaceId: string;
    purpose: PaymentPurpose;
    orderId: string;
    plan: string | null;
    amountCents: number;
    description: string;
    at: Date;
  },
): Promise<string> {
  const provider = services.billing.provider;
  await em.execute(
    `insert into payments (id, workspace_id, provider, purpose, order_id, plan, amount_cents, status, description, failure_reason, created_at, completed_at)
     values (?, ?, ?, ?, ?, ?, ?, 'pending', ?, null, ?, null)`,
    [payment.id, payment.workspaceId, provider.id, payment.purpose, payment.orderId, payment.plan, payment.amountCents, payment.description, payment.at],
    'run',
  );
  return provider.checkoutUrl({ paymentId: payment.id, workspaceId: payment.workspaceId, amountCents: payment.amountCents, description: payment.description });
}

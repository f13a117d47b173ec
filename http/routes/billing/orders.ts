import type { Services } from '../../services.ts';
import { insertPendingPayment as insertPayment, type PendingPayment } from '../../../persistence/stores/payments.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';

export type { PaymentPurpose } from '../../../persistence/stores/payments.ts';

/**
 * A pending payment for an order (a top-up, a deposit, a plan), written in the caller's transaction with
 * its order; the provider's checkout URL is where the customer pays it. Nothing moves until the provider's
 * signed event says it was paid.
 */
export async function insertPendingPayment(unit: Unit, services: Services, payment: Omit<PendingPayment, 'provider'>): Promise<string> {
  const provider = services.billing.provider;
  await insertPayment(unit, { ...payment, provider: provider.id });
  return provider.checkoutUrl({ paymentId: payment.id, workspaceId: payment.workspaceId, amountCents: payment.amountCents, description: payment.description });
}

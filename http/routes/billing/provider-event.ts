import type { Services } from '../../services.ts';
import type { ProviderEvent } from '../../../actors/billing/provider.ts';
import type { PaymentEventReply } from '../../../actors/workspace/protocol.ts';
import { workspaceOfPayment as paymentWorkspace } from '../../../persistence/stores/payments.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

/** The workspace a payment belongs to, or undefined for an unknown payment. */
export async function workspaceOfPayment(services: Services, paymentId: string): Promise<string | undefined> {
  return paymentWorkspace(openUnit(services.db), paymentId);
}

/**
 * Hands a verified provider event to the workspace actor that owns its payment; that actor applies it
 * once (by event id, and by the payment still being pending). An event for an unknown payment is acknowledged
 * and ignored, so the provider stops resending it. `workspaceId`: the payment's, when the caller already looked it up.
 */
export async function applyVerifiedEvent(services: Services, provider: string, event: ProviderEvent, workspaceId?: string): Promise<PaymentEventReply> {
  const workspace = workspaceId ?? (await workspaceOfPayment(services, event.paymentId));
  if (!workspace) return { applied: false, reason: 'unknown payment' };
  return services.actors.ask('ws', workspace, { type: 'payment_event', provider, event });
}

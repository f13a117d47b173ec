import type { Services } from '../../../runtime/services.ts';
import type { ProviderEvent } from '../../../actors/billing/provider.ts';
import type { PaymentEventReply } from '../../../actors/workspace/protocol.ts';

/**
 * Hands a verified provider event to the workspace actor that owns its payment; that actor applies it
 * once (by event id, and by the payment still being pending). An event for an unknown payment is acknowledged
 * and ignored, so the provider stops resending it.
 */
export async function applyVerifiedEvent(services: Services, provider: string, event: ProviderEvent): Promise<PaymentEventReply> {
  const rows = await services.db.em().execute<Array<{ workspace_id: string }>>('select workspace_id from payments where id = ?', [event.paymentId]);
  const workspaceId = rows[0]?.workspace_id;
  if (!workspaceId) return { applied: false, reason: 'unknown payment' };
  return services.actors.ask<PaymentEventReply>('ws', workspaceId, { type: 'payment_event', provider, event });
}

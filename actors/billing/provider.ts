/**
 * What the service needs from a payment provider (a card processor). The provider collects the money;
 * the service learns the outcome from signed events it verifies before acting, and applies each payment
 * once whatever number of times its events arrive.
 */
export interface PaymentIntent {
  paymentId: string;
  workspaceId: string;
  amountCents: number;
  description: string;
}

export type ProviderEventType = 'payment.succeeded' | 'payment.failed';
export const PROVIDER_EVENT_TYPES: readonly ProviderEventType[] = ['payment.succeeded', 'payment.failed'];

/** A verified provider event. */
export interface ProviderEvent {
  id: string;
  type: ProviderEventType;
  paymentId: string;
  failureReason?: string;
  /** When the provider made it, in milliseconds. */
  createdAt: number;
}

export type ChargeResult = { ok: true; reference: string } | { ok: false; reason: string };

export interface PaymentProvider {
  readonly id: string;
  /** Where the customer pays a pending payment. */
  checkoutUrl(intent: PaymentIntent): string;
  /** A customer portal session for the workspace, valid for a short time. */
  portalUrl(workspaceId: string): { url: string; expiresAt: number };
  /** Charges the payment method saved at checkout, without the customer (renewals, auto-recharge). */
  chargeSaved(intent: PaymentIntent): Promise<ChargeResult>;
  /** The event in a request the provider POSTed, or null when its signature is not valid or too old. */
  verifyEvent(rawBody: Buffer, signatureHeader: string | undefined): ProviderEvent | null;
}

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../../../runtime/clock.ts';
import { PROVIDER_EVENT_TYPES, type ChargeResult, type PaymentIntent, type PaymentProvider, type ProviderEvent, type ProviderEventType } from '../provider.ts';

/** The header of a provider event: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`. */
export const BILLING_SIGNATURE_HEADER = 'x-billing-signature';
/** Events signed longer ago (or further ahead) than this are refused, so a captured event cannot be replayed later. */
export const EVENT_TOLERANCE_MS = 5 * 60_000;
const PORTAL_TTL_MS = 15 * 60_000;
const EVENT_ID = /^evt_[A-Za-z0-9]{8,64}$/;

export interface LocalProviderOptions {
  secret: Buffer;
  /** The service's public address: checkout and portal pages are served by the service itself. */
  baseUrl: () => string;
  clock: Clock;
}

/**
 * A card processor simulated inside the service, with no network: its checkout page (served by the
 * service) lets the customer pay or decline; the outcome is a signed event handed to the same verifying
 * entry point a remote provider's POST reaches. A card saved at a paid checkout is charged for renewals
 * and auto-recharges, and those charges always succeed.
 */
export class LocalPaymentProvider implements PaymentProvider {
  readonly id = 'local';

  constructor(private readonly options: LocalProviderOptions) {}

  private mac(text: string): string {
    return createHmac('sha256', this.options.secret).update(text).digest('hex');
  }

  private same(expected: string, given: string): boolean {
    if (!/^[0-9a-f]{64}$/.test(given)) return false;
    return timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(given, 'hex'));
  }

  checkoutToken(paymentId: string): string {
    return this.mac(JSON.stringify(['checkout', paymentId]));
  }

  verifyCheckoutToken(paymentId: string, token: string): boolean {
    return this.same(this.checkoutToken(paymentId), token);
  }

  checkoutUrl(intent: PaymentIntent): string {
    return `${this.options.baseUrl()}/v1/billing/local/checkout/${encodeURIComponent(intent.paymentId)}?token=${this.checkoutToken(intent.paymentId)}`;
  }

  portalUrl(workspaceId: string): { url: string; expiresAt: number } {
    const expiresAt = this.options.clock.now() + PORTAL_TTL_MS;
    const token = this.mac(JSON.stringify(['portal', workspaceId, expiresAt]));
    return {
      url: `${this.options.baseUrl()}/v1/billing/local/portal?workspaceId=${encodeURIComponent(workspaceId)}&expires=${expiresAt}&token=${token}`,
      expiresAt,
    };
  }

  verifyPortal(workspaceId: string, expiresAt: number, token: string): boolean {
    if (!Number.isSafeInteger(expiresAt) || expiresAt < this.options.clock.now()) return false;
    return this.same(this.mac(JSON.stringify(['portal', workspaceId, expiresAt])), token);
  }

  async chargeSaved(_intent: PaymentIntent): Promise<ChargeResult> {
    return { ok: true, reference: `local_ch_${randomBytes(12).toString('hex')}` };
  }

  /** The signature header for a raw body, as the provider sends it. */
  sign(rawBody: string, at: number = this.options.clock.now()): string {
    const t = Math.floor(at / 1000);
    return `t=${t},v1=${this.mac(`${t}.${rawBody}`)}`;
  }

  /** A new signed event for a payment's outcome. */
  event(paymentId: string, type: ProviderEventType, failureReason?: string): { raw: string; signature: string } {
    const now = this.options.clock.now();
    const raw = JSON.stringify({
      id: `evt_${randomBytes(12).toString('hex')}`,
      type,
      createdAt: new Date(now).toISOString(),
      data: { paymentId, ...(failureReason ? { failureReason } : {}) },
    });
    return { raw, signature: this.sign(raw, now) };
  }

  verifyEvent(rawBody: Buffer, signatureHeader: string | undefined): ProviderEvent | null {
    if (!signatureHeader) return null;
    const parts = new Map(
      signatureHeader.split(',').map((part) => {
        const at = part.indexOf('=');
        return [part.slice(0, at).trim(), part.slice(at + 1).trim()] as const;
      }),
    );
    const t = parts.get('t');
    const v1 = parts.get('v1');
    if (!t || !/^\d{1,12}$/.test(t) || !v1) return null;
    if (Math.abs(this.options.clock.now() - Number(t) * 1000) > EVENT_TOLERANCE_MS) return null;
    const expected = createHmac('sha256', this.options.secret).update(`${t}.`).update(rawBody).digest('hex');
    if (!this.same(expected, v1)) return null;
    let body: unknown;
    try {
      body = JSON.parse(rawBody.toString('utf8'));
    } catch {
      return null;
    }
    const event = body as { id?: unknown; type?: unknown; createdAt?: unknown; data?: { paymentId?: unknown; failureReason?: unknown } };
    if (typeof event.id !== 'string' || !EVENT_ID.test(event.id)) return null;
    if (typeof event.type !== 'string' || !(PROVIDER_EVENT_TYPES as readonly string[]).includes(event.type)) return null;
    if (typeof event.data?.paymentId !== 'string' || event.data.paymentId.length > 64) return null;
    const createdAt = typeof event.createdAt === 'string' ? Date.parse(event.createdAt) : NaN;
    return {
      id: event.id,
      type: event.type as ProviderEventType,
      paymentId: event.data.paymentId,
      ...(typeof event.data.failureReason === 'string' ? { failureReason: event.data.failureReason.slice(0, 200) } : {}),
      createdAt: Number.isNaN(createdAt) ? Number(t) * 1000 : createdAt,
    };
  }
}

import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute, type RequestContext } from '../../route.ts';
import type { Services } from '../../services.ts';
import type { LocalPaymentProvider } from '../../../actors/billing/local/provider.ts';
import { dollars, escapeHtml, htmlPage } from './html.ts';
import { applyVerifiedEvent } from './provider-event.ts';
import { workspaceOfRow } from '../../owner.ts';
import { localPayment, type LocalPaymentView } from '../../../persistence/stores/payments.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

const Params = Type.Object({ paymentId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });
const TokenQuery = Type.Object({ token: Type.String({ minLength: 64, maxLength: 64 }) }, { additionalProperties: false });

/** The local provider and the payment a checkout link is for; a link with a wrong token is 404 like a missing payment. */
async function checkoutPayment(services: Services, paymentId: string, token: string): Promise<{ local: LocalPaymentProvider; payment: LocalPaymentView }> {
  const local = services.billing.local;
  if (!local?.verifyCheckoutToken(paymentId, token)) throw new ApiError('not_found', 'No such checkout.');
  const payment = await localPayment(openUnit(services.db), paymentId);
  if (!payment) throw new ApiError('not_found', 'No such checkout.');
  return { local, payment };
}

export const showLocalCheckout = defineRoute({
  method: 'GET',
  path: '/v1/billing/local/checkout/:paymentId',
  operationId: 'showLocalCheckout',
  summary: "The local payment provider's checkout page (HTML): pay or decline a pending payment",
  description:
    'The checkout page (HTML) of the built-in local payment provider, for development and tests: pay or decline a pending payment. The token of the link is the credential; a wrong one is 404, as a missing payment.',
  tags: ['billing'],
  access: 'public',
  params: Params,
  query: TokenQuery,
  responses: { 200: null },
  handler: async ({ params, query, services }) => {
    const { payment } = await checkoutPayment(services, params.paymentId, query.token);
    const amount = `${escapeHtml(payment.description)}: <strong>${dollars(Number(payment.amount_cents))}</strong>`;
    if (payment.status !== 'pending')
      return htmlPage('Checkout', `<p>${amount}</p><p>This payment is already <strong>${escapeHtml(payment.status)}</strong>.</p>`);
    const action = (outcome: string) => `/v1/billing/local/checkout/${encodeURIComponent(payment.id)}/${outcome}?token=${encodeURIComponent(query.token)}`;
    return htmlPage(
      'Checkout',
      `<p>${amount}</p><p>Test card processor: no money moves.</p>` +
        `<form method="post" action="${action('pay')}" style="display:inline"><button type="submit">Pay ${dollars(Number(payment.amount_cents))}</button></form>` +
        `<form method="post" action="${action('decline')}" style="display:inline"><button type="submit">Decline</button></form>`,
    );
  },
});

async function complete(ctx: RequestContext<{ paymentId: string }, { token: string }, undefined>, outcome: 'payment.succeeded' | 'payment.failed') {
  const { local, payment } = await checkoutPayment(ctx.services, ctx.params.paymentId, ctx.query.token);
  if (payment.status !== 'pending') return htmlPage('Checkout', `<p>This payment is already <strong>${escapeHtml(payment.status)}</strong>.</p>`, 409);
  // The same path a remote provider's event takes: a signed event, verified, then applied once.
  const signed = local.event(payment.id, outcome, outcome === 'payment.failed' ? 'card_declined' : undefined);
  const event = local.verifyEvent(Buffer.from(signed.raw), signed.signature);
  if (!event) throw new Error('the local provider could not verify its own event');
  await applyVerifiedEvent(ctx.services, local.id, event);
  return htmlPage(
    outcome === 'payment.succeeded' ? 'Payment complete' : 'Payment declined',
    `<p>${escapeHtml(payment.description)}: ${dollars(Number(payment.amount_cents))} ${outcome === 'payment.succeeded' ? 'paid' : 'declined'}.</p><p>You can close this page.</p>`,
  );
}

export const payLocalCheckout = defineRoute({
  method: 'POST',
  path: '/v1/billing/local/checkout/:paymentId/pay',
  operationId: 'payLocalCheckout',
  summary: 'Completes a local-provider checkout: the provider signs a payment.succeeded event and the service applies it',
  description:
    "Completes a local-provider checkout: the provider signs a payment.succeeded event and the service applies it, as it would a real provider's. A payment no longer pending answers a 409 HTML page.",
  tags: ['billing'],
  access: 'public',
  owner: workspaceOfRow('payments', 'paymentId'),
  params: Params,
  query: TokenQuery,
  responses: { 200: null },
  handler: (ctx) => complete(ctx, 'payment.succeeded'),
});

export const declineLocalCheckout = defineRoute({
  method: 'POST',
  path: '/v1/billing/local/checkout/:paymentId/decline',
  operationId: 'declineLocalCheckout',
  summary: 'Declines a local-provider checkout: a signed payment.failed event; the order is marked failed',
  description:
    'Declines a local-provider checkout: the provider signs a payment.failed event and the order is marked failed. A payment no longer pending answers a 409 HTML page.',
  tags: ['billing'],
  access: 'public',
  owner: workspaceOfRow('payments', 'paymentId'),
  params: Params,
  query: TokenQuery,
  responses: { 200: null },
  handler: (ctx) => complete(ctx, 'payment.failed'),
});

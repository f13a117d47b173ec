import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { moneyWorkspace } from './access.ts';
import { insertPendingPayment } from './orders.ts';
import { CheckoutFields, WorkspaceIdField } from './shapes.ts';
import { activeSubscriptionPlan } from '../../../persistence/stores/payments.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const CheckoutIn = Type.Object(
  {
    workspaceId: WorkspaceIdField,
    plan: Type.String({ minLength: 1, maxLength: 128, description: 'A paid plan of the catalog (GET /v1/plans; pro and team in the shipped one).' }),
  },
  { additionalProperties: false },
);

export const CheckoutOut = Type.Object(
  {
    ...CheckoutFields,
    subscriptionId: Type.String({ description: 'The subscription the payment starts (sub_…).' }),
    plan: Type.String(),
    amountCents: Type.Integer({ description: 'The first month, in US cents.' }),
    status: Type.Literal('pending'),
  },
  { additionalProperties: false },
);

export const createCheckout = defineRoute({
  method: 'POST',
  path: '/v1/billing/checkout',
  operationId: 'createBillingCheckout',
  summary: 'Start a checkout for a paid plan; the subscription starts when the provider confirms the payment',
  description:
    "Starts a checkout for a paid plan and answers the payment page's URL; the subscription starts once the payment provider confirms. Owners and admins when signed in; an API key needs wallet.write. Subscribing to the plan already in force is 409.",
  tags: ['billing'],
  access: 'auth',
  keys: { scopes: ['wallet.write'] },
  errors: ['not_found', 'conflict'],
  body: CheckoutIn,
  responses: { 201: CheckoutOut },
  handler: async ({ auth, body, services }) => {
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, body.workspaceId, { action: 'manage billing', keyScopes: ['wallet.write'] });
    const catalog = services.catalog;
    if (!catalog.hasPlan(body.plan))
      throw new ApiError(
        'validation_error',
        `body.plan: unknown plan "${body.plan}" (one of ${catalog
          .plans()
          .map((p) => p.id)
          .join(', ')})`,
      );
    const plan = catalog.plan(body.plan);
    if (plan.monthlyPriceCents === 0) {
      throw new ApiError(
        'validation_error',
        `body.plan: the ${plan.name} plan needs no checkout; cancel the subscription (POST /v1/billing/cancel) to return to the ${catalog.defaultPlan().name} plan at the end of the period`,
      );
    }
    const active = await activeSubscriptionPlan(unit, workspace.id);
    if (active?.plan === plan.id) throw new ApiError('conflict', `The workspace already subscribes to the ${plan.name} plan.`);
    const now = services.clock.now();
    const at = new Date(now);
    const subscriptionId = newId('sub', now);
    const paymentId = newId('pay', now);
    const checkoutUrl = await insertPendingPayment(unit, services, {
      id: paymentId,
      workspaceId: workspace.id,
      purpose: 'subscription',
      orderId: subscriptionId,
      plan: plan.id,
      amountCents: plan.monthlyPriceCents,
      description: `${plan.name} plan, first month`,
      at,
    });
    return { status: 201, body: { paymentId, checkoutUrl, subscriptionId, plan: plan.id, amountCents: plan.monthlyPriceCents, status: 'pending' as const } };
  },
});

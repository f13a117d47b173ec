import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { insertPendingPayment } from '../billing/orders.ts';
import { CheckoutFields, TopUpOut, WorkspaceIdField } from '../billing/shapes.ts';
import { insertPendingTopUp } from '../../../persistence/stores/payments.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';

export const MIN_TOP_UP_CREDITS = 100;
export const MAX_TOP_UP_CREDITS = 1_000_000;

export const CreateTopUpIn = Type.Object(
  {
    workspaceId: WorkspaceIdField,
    credits: Type.Integer({ minimum: MIN_TOP_UP_CREDITS, maximum: MAX_TOP_UP_CREDITS, description: "Credits to buy, at the plan's cents per credit." }),
  },
  { additionalProperties: false },
);

export const TopUpCreatedOut = Type.Object({ ...TopUpOut.properties, ...CheckoutFields }, { additionalProperties: false });

export const createCreditTopUp = defineRoute({
  method: 'POST',
  path: '/v1/credits/top-ups',
  operationId: 'createCreditTopUp',
  summary: 'Create a pending credit top-up order; pay it at checkoutUrl, and the credits are granted once the provider confirms',
  description:
    "Creates a pending order for credits at the plan's price per credit; pay it at checkoutUrl, and the credits are granted once the payment provider confirms. Owners and admins only when signed in.",
  tags: ['credits'],
  access: { scopes: ['wallet.write'] },
  errors: ['not_found'],
  body: CreateTopUpIn,
  responses: { 201: TopUpCreatedOut },
  handler: async ({ auth, body, services }) => {
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, body.workspaceId, { action: 'buy credits' });
    const plan = services.catalog.plan(workspace.plan);
    const now = services.clock.now();
    const at = new Date(now);
    const id = newId('top', now);
    const paymentId = newId('pay', now);
    const amountCents = body.credits * plan.centsPerCredit;
    let checkoutUrl = '';
    await inTransaction(unit, async (tx) => {
      await insertPendingTopUp(tx, { id, workspaceId: workspace.id, credits: body.credits, amountCents, paymentId, at });
      checkoutUrl = await insertPendingPayment(tx, services, {
        id: paymentId,
        workspaceId: workspace.id,
        purpose: 'credit_top_up',
        orderId: id,
        plan: null,
        amountCents,
        description: `${body.credits} credits`,
        at,
      });
    });
    return {
      status: 201,
      body: {
        id,
        workspaceId: workspace.id,
        credits: body.credits,
        amountCents,
        status: 'pending',
        paymentId,
        createdAt: at.toISOString(),
        completedAt: null,
        checkoutUrl,
      },
    };
  },
});

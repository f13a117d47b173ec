import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { WALLET_MINIMUM_DEPOSIT_CENTS } from '../../../domain/account.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { insertPendingPayment } from '../billing/orders.ts';
import { CheckoutFields, DepositOut, WorkspaceIdField } from '../billing/shapes.ts';
import { insertPendingDeposit } from '../../../persistence/stores/payments.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';

export const MAX_DEPOSIT_CENTS = 10_000_000;

export const WalletTopUpIn = Type.Object(
  {
    workspaceId: WorkspaceIdField,
    amountCents: Type.Integer({ description: `US cents, at least ${WALLET_MINIMUM_DEPOSIT_CENTS} (10 dollars).` }),
  },
  { additionalProperties: false },
);

export const DepositCreatedOut = Type.Object({ ...DepositOut.properties, ...CheckoutFields }, { additionalProperties: false });

export const createWalletTopUp = defineRoute({
  method: 'POST',
  path: '/v1/wallet/top-ups',
  operationId: 'createWalletTopUp',
  summary: 'Deposit funds into the wallet (at least 10 dollars): a pending deposit paid at checkoutUrl, credited once the provider confirms',
  description:
    'Deposits funds into the wallet (at least 1000 cents): a pending deposit paid at checkoutUrl, credited once the payment provider confirms. Owners and admins only when signed in.',
  tags: ['wallet'],
  access: { scopes: ['wallet.write'] },
  errors: ['not_found'],
  body: WalletTopUpIn,
  responses: { 201: DepositCreatedOut },
  handler: async ({ auth, body, services }) => {
    if (body.amountCents < WALLET_MINIMUM_DEPOSIT_CENTS) {
      throw new ApiError('validation_error', `body.amountCents: the minimum deposit is ${WALLET_MINIMUM_DEPOSIT_CENTS} cents (10 dollars)`);
    }
    if (body.amountCents > MAX_DEPOSIT_CENTS) throw new ApiError('validation_error', `body.amountCents: at most ${MAX_DEPOSIT_CENTS} cents per deposit`);
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, body.workspaceId, { action: 'deposit into the wallet' });
    const now = services.clock.now();
    const at = new Date(now);
    const id = newId('dep', now);
    const paymentId = newId('pay', now);
    let checkoutUrl = '';
    await inTransaction(unit, async (tx) => {
      await insertPendingDeposit(tx, { id, workspaceId: workspace.id, amountCents: body.amountCents, paymentId, at });
      checkoutUrl = await insertPendingPayment(tx, services, {
        id: paymentId,
        workspaceId: workspace.id,
        purpose: 'wallet_deposit',
        orderId: id,
        plan: null,
        amountCents: body.amountCents,
        description: `Wallet deposit`,
        at,
      });
    });
    return {
      status: 201,
      body: {
        id,
        workspaceId: workspace.id,
        amountCents: body.amountCents,
        source: 'checkout' as const,
        status: 'pending' as const,
        paymentId,
        createdAt: at.toISOString(),
        completedAt: null,
        checkoutUrl,
      },
    };
  },
});

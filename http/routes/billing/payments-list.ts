import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { Page, PageQueryFields } from '../../pagination.ts';
import { moneyWorkspace } from './access.ts';
import { keysetPage } from './keyset.ts';
import { PaymentOut, toPaymentOut, WorkspaceIdField } from './shapes.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const listPayments = defineRoute({
  method: 'GET',
  path: '/v1/billing/payments',
  operationId: 'listBillingPayments',
  summary: 'Payments of a workspace (subscriptions, credit top-ups, wallet deposits), newest first',
  description: 'Lists the payments of a workspace (subscriptions, credit top-ups and wallet deposits) with their status, newest first.',
  tags: ['billing'],
  access: 'auth',
  errors: ['not_found'],
  query: Type.Object({ workspaceId: WorkspaceIdField, ...PageQueryFields }, { additionalProperties: false }),
  responses: { 200: Page(PaymentOut) },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, query.workspaceId);
    return { body: await keysetPage(unit, 'payments', workspace.id, {}, query, toPaymentOut) };
  },
});

import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { Page, PageQueryFields } from '../../pagination.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { keysetPage } from '../billing/keyset.ts';
import { DepositOut, toDepositOut, WorkspaceIdField } from '../billing/shapes.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const listWalletDeposits = defineRoute({
  method: 'GET',
  path: '/v1/wallet/deposits',
  operationId: 'listWalletDeposits',
  summary: 'Wallet deposits (checkout and auto-recharge) with their status, newest first',
  description: "Lists the wallet's deposits (checkout and auto-recharge) with their status, newest first.",
  tags: ['wallet'],
  access: { scopes: ['wallet.read', 'usage.read'] },
  errors: ['not_found'],
  query: Type.Object({ workspaceId: WorkspaceIdField, ...PageQueryFields }, { additionalProperties: false }),
  responses: { 200: Page(DepositOut) },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, query.workspaceId);
    return { body: await keysetPage(unit, 'wallet_deposits', workspace.id, {}, query, toDepositOut) };
  },
});

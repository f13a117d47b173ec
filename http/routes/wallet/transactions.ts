import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { Page, PageQueryFields } from '../../pagination.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { keysetPage } from '../billing/keyset.ts';
import { LedgerEntryOut, toLedgerEntryOut, WorkspaceIdField } from '../billing/shapes.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const listWalletTransactions = defineRoute({
  method: 'GET',
  path: '/v1/wallet/transactions',
  operationId: 'listWalletTransactions',
  summary: 'Wallet transactions (deposits, and holds, charges and refunds of jobs paid from the wallet), newest first',
  description: "Lists the wallet's transactions, newest first: deposits, and the holds, charges and refunds of jobs paid from the wallet.",
  tags: ['wallet'],
  access: { scopes: ['wallet.read', 'usage.read'] },
  errors: ['not_found'],
  query: Type.Object({ workspaceId: WorkspaceIdField, ...PageQueryFields }, { additionalProperties: false }),
  responses: { 200: Page(LedgerEntryOut) },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, query.workspaceId);
    return { body: await keysetPage(unit, 'credit_ledger', workspace.id, { walletOnly: true }, query, toLedgerEntryOut) };
  },
});

import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { WorkspaceIdField } from '../billing/shapes.ts';
import { toWalletOut, WalletOut } from './shapes.ts';
import { namedWorkspace } from '../../owner.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const getWallet = defineRoute({
  method: 'GET',
  path: '/v1/wallet',
  operationId: 'getWallet',
  summary: "The pay-as-you-go wallet: balance, activation, settings and this month's spend",
  description:
    "The pay-as-you-go wallet of a workspace: its balance, whether it is activated, its auto-recharge and spend-cap settings, and this month's spend.",
  tags: ['wallet'],
  access: { scopes: ['wallet.read', 'usage.read'] },
  errors: ['not_found'],
  owner: namedWorkspace,
  query: Type.Object({ workspaceId: WorkspaceIdField }, { additionalProperties: false }),
  responses: { 200: WalletOut },
  handler: async ({ auth, query, services }) => {
    const workspace = await moneyWorkspace(openUnit(services.db), auth, query.workspaceId);
    const wallet = await services.actors.ask('ws', workspace.id, { type: 'wallet' });
    return { body: toWalletOut(workspace.id, services.catalog.plan(workspace.plan), wallet) };
  },
});

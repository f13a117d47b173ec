import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { Page, PageQueryFields } from '../../pagination.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { keysetPage } from '../billing/keyset.ts';
import { TopUpOut, toTopUpOut, WorkspaceIdField } from '../billing/shapes.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const listCreditTopUps = defineRoute({
  method: 'GET',
  path: '/v1/credits/top-ups',
  operationId: 'listCreditTopUps',
  summary: 'Credit top-up orders of a workspace, newest first',
  description: 'Lists the credit top-up orders of a workspace with their status, newest first.',
  tags: ['credits'],
  access: { scopes: ['usage.read'] },
  errors: ['not_found'],
  query: Type.Object(
    {
      workspaceId: WorkspaceIdField,
      status: Type.Optional(Type.Union([Type.Literal('pending'), Type.Literal('paid'), Type.Literal('failed')])),
      ...PageQueryFields,
    },
    { additionalProperties: false },
  ),
  responses: { 200: Page(TopUpOut) },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, query.workspaceId);
    return { body: await keysetPage(unit, 'credit_top_ups', workspace.id, { status: query.status }, query, toTopUpOut) };
  },
});

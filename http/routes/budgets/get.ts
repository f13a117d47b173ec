import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { WorkspaceIdField } from '../billing/shapes.ts';
import { listCrossings, readBudgetFigures, readBudgetSettings } from '../../../persistence/budgets.ts';
import { BudgetsOut, toBudgetsOut } from './shapes.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const getBudgets = defineRoute({
  method: 'GET',
  path: '/v1/budgets',
  operationId: 'getBudgets',
  summary: "Budget alerts: the workspace's thresholds, the figures they watch, and the thresholds crossed",
  description:
    'The thresholds that warn before the workspace runs out (credits used of the period grant, wallet balance, API keys’ spend caps), the figures they are checked against now, and the last crossings; those of the current period are what the dashboard shows as a banner.',
  tags: ['usage'],
  access: { scopes: ['usage.read'] },
  errors: ['not_found'],
  query: Type.Object({ workspaceId: WorkspaceIdField }, { additionalProperties: false }),
  responses: { 200: BudgetsOut },
  handler: async ({ auth, query, services }) => {
    const em = openUnit(services.db);
    const workspace = await moneyWorkspace(em, auth, query.workspaceId);
    const catalog = services.catalog;
    const [settings, figures, crossings] = await Promise.all([
      readBudgetSettings(em, workspace.id),
      readBudgetFigures(em, workspace.id, services.clock.now(), (plan) => catalog.plan(plan).monthlyCredits),
      listCrossings(em, workspace.id, 50),
    ]);
    return { body: toBudgetsOut(workspace.id, settings, figures, crossings) };
  },
});

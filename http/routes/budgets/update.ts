import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { emitCrossings } from '../../../actors/workspace/budget-watch.ts';
import { listCrossings, readBudgetFigures, readBudgetSettings, writeBudgetSettings } from '../../../persistence/budgets.ts';
import { BudgetsOut, BudgetsPatch, toBudgetsOut } from './shapes.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const updateBudgets = defineRoute({
  method: 'PATCH',
  path: '/v1/budgets',
  operationId: 'updateBudgets',
  summary: 'Set budget alert thresholds (credits used, wallet balance, API key spend); fields left out keep their value',
  description:
    'Sets the thresholds that warn with a budget.threshold_crossed event and a dashboard banner, once per threshold and period. The workspace is checked at once, so a threshold already past is announced now. Owners and admins only when signed in.',
  tags: ['usage'],
  access: { scopes: ['wallet.write'] },
  errors: ['not_found'],
  body: BudgetsPatch,
  responses: { 200: BudgetsOut },
  handler: async ({ auth, body, services }) => {
    const em = openUnit(services.db);
    const workspace = await moneyWorkspace(em, auth, body.workspaceId, { action: 'change budget alerts' });
    const now = services.clock.now();
    const before = await readBudgetSettings(em, workspace.id);
    const sorted = (list: number[] | undefined, old: number[]) => (list === undefined ? old : [...list].sort((a, b) => a - b));
    const settings = {
      creditsUsedPercents: sorted(body.creditsUsedPercents, before.creditsUsedPercents),
      walletBelowCents: sorted(body.walletBelowCents, before.walletBelowCents).reverse(),
      keySpendPercents: sorted(body.keySpendPercents, before.keySpendPercents),
    };
    await writeBudgetSettings(em, workspace.id, settings, new Date(now));
    const catalog = services.catalog;
    const endpoints = await emitCrossings(services.db, catalog, workspace.id, settings, now);
    for (const id of endpoints) services.actors.tell('whk', id, { type: 'wake' });
    const [stored, figures, crossings] = await Promise.all([
      readBudgetSettings(em, workspace.id),
      readBudgetFigures(em, workspace.id, now, (plan) => catalog.plan(plan).monthlyCredits),
      listCrossings(em, workspace.id, 50),
    ]);
    return { body: toBudgetsOut(workspace.id, stored, figures, crossings) };
  },
});

import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { LedgerEntryOut, toLedgerEntryOut, WorkspaceIdField } from '../billing/shapes.ts';
import { namedWorkspace } from '../../owner.ts';
import { creditBalances, latestLedger } from '../../../persistence/stores/money.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const CreditsOut = Type.Object(
  {
    workspaceId: Type.String(),
    plan: Type.String(),
    availableCredits: Type.Integer({ minimum: 0, description: 'Credits a new job can use.' }),
    reservedCredits: Type.Integer({ minimum: 0, description: 'Credits held by unfinished jobs.' }),
    ledger: Type.Array(LedgerEntryOut, { description: 'The 20 most recent ledger entries, newest first.' }),
  },
  { additionalProperties: false },
);

export const getWorkspaceCredits = defineRoute({
  method: 'GET',
  path: '/v1/workspaces/:workspaceId/credits',
  operationId: 'getWorkspaceCredits',
  summary: 'Available and reserved credits, and the most recent ledger entries',
  description: "The workspace's available and reserved credits and its most recent ledger entries.",
  tags: ['credits'],
  access: { scopes: ['usage.read'] },
  owner: namedWorkspace,
  params: Type.Object({ workspaceId: WorkspaceIdField }, { additionalProperties: false }),
  responses: { 200: CreditsOut },
  handler: async ({ auth, params, services }) => {
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, params.workspaceId);
    // The actor opens the account on first use (the plan's opening grant), so the balances below exist.
    await services.actors.ask('ws', workspace.id, { type: 'balances' });
    const account = await creditBalances(unit, workspace.id);
    const ledger = await latestLedger(unit, workspace.id);
    return {
      body: {
        workspaceId: workspace.id,
        plan: services.catalog.plan(workspace.plan).id,
        availableCredits: Number(account?.available_credits ?? 0),
        reservedCredits: Number(account?.reserved_credits ?? 0),
        ledger: ledger.map(toLedgerEntryOut),
      },
    };
  },
});

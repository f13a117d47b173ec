import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { LedgerEntryOut, toLedgerEntryOut, WorkspaceIdField } from '../billing/shapes.ts';
import type { Row } from '../billing/keyset.ts';
import { namedWorkspace } from '../../owner.ts';

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
    const em = services.db.em();
    const workspace = await moneyWorkspace(em, auth, params.workspaceId);
    // The actor opens the account on first use (the plan's opening grant), so the balances below exist.
    await services.actors.ask('ws', workspace.id, { type: 'balances' });
    const [account] = await em.execute<Array<{ available_credits: number; reserved_credits: number }>>(
      'select available_credits, reserved_credits from workspace_accounts where workspace_id = ?',
      [workspace.id],
    );
    const ledger = await em.execute<Row[]>('select * from credit_ledger where workspace_id = ? order by created_at desc, id desc limit 20', [workspace.id]);
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

import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from './access.ts';
import { SubscriptionOut, toSubscriptionOut, WorkspaceIdField } from './shapes.ts';
import { PlanOut } from '../public/plans.ts';
import { activeSubscription } from '../../../persistence/stores/payments.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const SubscriptionStateOut = Type.Object(
  {
    workspaceId: Type.String(),
    plan: Type.String({ description: 'The plan in force now.' }),
    status: Type.Union([Type.Literal('active'), Type.Literal('canceling'), Type.Literal('none')], {
      description: 'active: renews at the period end; canceling: ends at the period end (cancelAtPeriodEnd); none: no paid subscription (free plan).',
    }),
    subscription: Type.Union([SubscriptionOut, Type.Null()]),
    entitlements: PlanOut,
  },
  { additionalProperties: false },
);

export const getSubscription = defineRoute({
  method: 'GET',
  path: '/v1/billing/subscription',
  operationId: 'getBillingSubscription',
  summary: 'The current subscription (plan, status, period) and the entitlements of the plan in force',
  description: "The workspace's current subscription (plan, status, period) and the entitlements of the plan in force.",
  tags: ['billing'],
  access: 'auth',
  errors: ['not_found'],
  query: Type.Object({ workspaceId: WorkspaceIdField }, { additionalProperties: false }),
  responses: { 200: SubscriptionStateOut },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    const workspace = await moneyWorkspace(unit, auth, query.workspaceId);
    const row = await activeSubscription(unit, workspace.id);
    const catalog = services.catalog;
    const plan = catalog.plan(workspace.plan);
    const offered = catalog.offered();
    return {
      body: {
        workspaceId: workspace.id,
        plan: plan.id,
        status: !row ? ('none' as const) : row.cancel_at_period_end ? ('canceling' as const) : ('active' as const),
        subscription: row ? toSubscriptionOut(row) : null,
        entitlements: {
          id: plan.id,
          name: plan.name,
          monthlyPriceCents: plan.monthlyPriceCents,
          currency: 'usd' as const,
          monthlyCredits: plan.monthlyCredits,
          walletCentsPerCredit: plan.centsPerCredit,
          concurrentJobs: plan.concurrentJobs,
          storageBytes: plan.storageBytes,
          maxFileBytes: plan.maxFileBytes,
          requestsPerMinute: plan.requestsPerMinute,
          models: offered.filter((model) => catalog.isAllowed(model, plan.id)).map((model) => model.id),
        },
      },
    };
  },
});

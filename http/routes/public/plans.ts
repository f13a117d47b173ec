import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';

export const PlanOut = Type.Object(
  {
    id: Type.String({ description: "The plan id (the catalog's; free, pro and team in the shipped one)." }),
    name: Type.String(),
    monthlyPriceCents: Type.Integer({ minimum: 0, description: 'Subscription price per month, in US cents.' }),
    currency: Type.Literal('usd'),
    monthlyCredits: Type.Integer({ minimum: 0, description: 'Credits granted at the start of every period.' }),
    walletCentsPerCredit: Type.Integer({ minimum: 0, description: 'What one credit costs when paid from the pay-as-you-go wallet, in US cents.' }),
    concurrentJobs: Type.Integer({ minimum: 1, description: 'Jobs past queued (reserved, submitted, running) at one time.' }),
    storageBytes: Type.Integer({ minimum: 0, description: 'Bytes of assets the workspace may keep.' }),
    maxFileBytes: Type.Integer({ minimum: 0, description: 'Largest single upload.' }),
    requestsPerMinute: Type.Integer({ minimum: 1, description: 'Rate limit per API key.' }),
    models: Type.Array(Type.String(), { description: 'Ids of the models the plan may use (of those this service runs).' }),
  },
  { additionalProperties: false },
);

export const PlansOut = Type.Object({ data: Type.Array(PlanOut) }, { additionalProperties: false });

export const listPlans = defineRoute({
  method: 'GET',
  path: '/v1/plans',
  operationId: 'listPlans',
  summary: 'Plan catalog: prices in cents, credits, entitlements, rate limits and the models each plan may use (no authentication)',
  description:
    'The plan catalog: monthly prices in cents, included credits, entitlements, API rate limits and the models each plan may use. Needs no credentials.',
  tags: ['public'],
  access: 'public',
  responses: { 200: PlansOut },
  handler: ({ services }) => {
    const catalog = services.catalog;
    const offered = catalog.offered();
    const data = catalog.plans().map((plan) => {
      const id = plan.id;
      return {
        id,
        name: plan.name,
        monthlyPriceCents: plan.monthlyPriceCents,
        currency: 'usd' as const,
        monthlyCredits: plan.monthlyCredits,
        walletCentsPerCredit: plan.centsPerCredit,
        concurrentJobs: plan.concurrentJobs,
        storageBytes: plan.storageBytes,
        maxFileBytes: plan.maxFileBytes,
        requestsPerMinute: plan.requestsPerMinute,
        models: offered.filter((model) => catalog.isAllowed(model, id)).map((model) => model.id),
      };
    });
    return { headers: { 'Cache-Control': 'public, max-age=60' }, body: { data } };
  },
});

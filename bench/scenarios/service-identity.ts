import type { Scenario } from '../lib/types.ts';

/** The cheapest route of the service against the raw uWS hello-world: the cost of the front end itself. */
export const serviceIdentity: Scenario = {
  name: 'service-identity',
  description: 'GET /v1 on the service (full pipeline: routing, span, response validation, request id) vs GET / on raw uWS',
  async run(ctx) {
    const result = await ctx.load({ path: '/v1', title: 'service GET /v1' });
    return { result, target: 0.8 };
  },
};

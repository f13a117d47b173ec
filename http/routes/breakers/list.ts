import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { ApiError } from '../../errors.ts';
import type { DeploymentBreaker } from '../../../providers/routing/breaker-store.ts';
import type { DeploymentRecord } from '../../../domain/catalog/index.ts';

export const BreakerOut = Type.Object(
  {
    deploymentId: Type.String({ description: 'The catalog deployment.' }),
    modelId: Type.String({ description: 'The model it serves.' }),
    provider: Type.String({ description: 'Its provider kind (`local`, `openai`, `replicate`, `cog`, `fal`, `comfyui`).' }),
    state: Type.Union([Type.Literal('closed'), Type.Literal('open'), Type.Literal('half_open'), Type.Literal('unconfigured')], {
      description:
        "`closed`: jobs go; `open`: none go until `openUntil`; `half_open`: the cool-down is over and one job at a time is let through to try it; `unconfigured`: the deployment's provider kind is not configured on this service (no key or base URL), so no job goes there whatever its breaker says (its figures are still shown).",
    }),
    calls: Type.Integer({ minimum: 0, description: 'Counted outcomes in the sliding window now (closed only).' }),
    failures: Type.Integer({ minimum: 0, description: 'Of those, failures.' }),
    failureRatio: Type.Number({ minimum: 0, maximum: 1, description: 'failures / calls, 0 when there are none.' }),
    openUntil: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'While open: when the cool-down ends.' }),
    cooldownMs: Type.Integer({
      minimum: 0,
      description: 'The cool-down of the last opening by failures (doubled by each failed half-open job); 0 once closed.',
    }),
    probing: Type.Boolean({ description: 'Half-open: a job holds the one ticket and its outcome is awaited.' }),
    openedWith: Type.Union(
      [
        Type.Object(
          {
            at: Type.String({ format: 'date-time', description: 'When it opened.' }),
            calls: Type.Integer({ minimum: 0, description: 'Counted outcomes in its window at that moment (the window is emptied when it opens).' }),
            failures: Type.Integer({ minimum: 0, description: 'Of those, failures.' }),
            failureRatio: Type.Number({ minimum: 0, maximum: 1, description: 'failures / calls, 0 when there were none.' }),
            reason: Type.Union([Type.Literal('failures'), Type.Literal('retry_after'), Type.Literal('at_once'), Type.Literal('probe_failed')], {
              description:
                '`failures`: the failure ratio of its window; `retry_after`: a 429 with Retry-After; `at_once`: a failure that opens at once (a refused key); `probe_failed`: the half-open job failed.',
            }),
          },
          { additionalProperties: false },
        ),
        Type.Null(),
      ],
      { description: 'Open or half-open: what opened it last; null while closed.' },
    ),
  },
  { additionalProperties: false },
);

export const BreakersOut = Type.Object(
  {
    breakers: Type.Array(BreakerOut, { description: 'Every deployment of the catalog, in its order.' }),
    at: Type.String({ format: 'date-time', description: 'The time of the reading.' }),
  },
  { additionalProperties: false },
);

function toBreakerOut(deployment: DeploymentRecord, breaker: DeploymentBreaker, configured: boolean) {
  return {
    deploymentId: deployment.id,
    modelId: deployment.modelId,
    provider: deployment.provider,
    state: configured ? breaker.status : ('unconfigured' as const),
    calls: breaker.calls,
    failures: breaker.failures,
    failureRatio: breaker.failureRatio,
    openUntil: breaker.openUntil === null ? null : new Date(breaker.openUntil).toISOString(),
    cooldownMs: breaker.cooldownMs,
    probing: breaker.probing,
    openedWith: breaker.opened
      ? {
          at: new Date(breaker.opened.at).toISOString(),
          calls: breaker.opened.calls,
          failures: breaker.opened.failures,
          failureRatio: breaker.opened.calls > 0 ? breaker.opened.failures / breaker.opened.calls : 0,
          reason: breaker.opened.reason,
        }
      : null,
  };
}

export const listBreakers = defineRoute({
  method: 'GET',
  path: '/v1/breakers',
  operationId: 'listBreakers',
  summary: 'The circuit breaker of every provider deployment (operator information; any valid key or session)',
  description:
    "Each catalog deployment's circuit breaker as the cluster shares it: its state, the failures in its window and when an open one lets a job through again. Like the emergency stop's state, any valid API key or session may read it; it names no upstream target and no secret.",
  tags: ['providers'],
  access: 'auth',
  // Platform-wide: no workspace involved.
  keyWorkspace: 'none',
  needsDatabase: false,
  errors: ['service_unavailable'],
  responses: { 200: BreakersOut },
  handler: async ({ services }) => {
    const deployments = services.catalog.deployments();
    let breakers: DeploymentBreaker[];
    try {
      breakers = await services.breakers.read(deployments.map((deployment) => deployment.id));
    } catch (error) {
      services.logger.warn({ err: error }, 'circuit breakers could not be read');
      throw new ApiError('service_unavailable', "The circuit breakers' store cannot be reached; retry shortly.", { 'Retry-After': '2' });
    }
    return {
      headers: { 'Cache-Control': 'no-store' },
      body: {
        breakers: deployments.map((deployment, i) => toBreakerOut(deployment, breakers[i]!, services.providers.has(deployment.provider))),
        at: new Date(services.clock.now()).toISOString(),
      },
    };
  },
});

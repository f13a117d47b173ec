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
    state: Type.Union([Type.Literal('closed'), Type.Literal('open'), Type.Literal('half_open')], {
      description: '`closed`: jobs go; `open`: none go until `openUntil`; `half_open`: the cool-down is over and one job at a time is let through to try it.',
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

function toBreakerOut(deployment: DeploymentRecord, breaker: DeploymentBreaker) {
  return {
    deploymentId: deployment.id,
    modelId: deployment.modelId,
    provider: deployment.provider,
    state: breaker.status,
    calls: breaker.calls,
    failures: breaker.failures,
    failureRatio: breaker.failureRatio,
    openUntil: breaker.openUntil === null ? null : new Date(breaker.openUntil).toISOString(),
    cooldownMs: breaker.cooldownMs,
    probing: breaker.probing,
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
      body: { breakers: deployments.map((deployment, i) => toBreakerOut(deployment, breakers[i]!)), at: new Date(services.clock.now()).toISOString() },
    };
  },
});

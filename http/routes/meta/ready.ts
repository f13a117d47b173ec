import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { availabilityOf, isDatabaseUnreachable } from '../../../persistence/availability.ts';

const PING_TIMEOUT_MS = 2_000;

export const Readiness = Type.Object(
  {
    status: Type.Literal('ready'),
    checks: Type.Object({ database: Type.Literal('ok'), recovery: Type.Literal('done') }),
    catalog: Type.Object(
      {
        version: Type.String({
          description: 'The version (a hash of the content) of the catalog this node serves; every node of a cluster should show the same.',
        }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export const getReadiness = defineRoute({
  method: 'GET',
  path: '/health/ready',
  operationId: 'getReadiness',
  summary: 'Readiness probe: 200 once the database answers and recovery has finished, 503 otherwise (also while the database cannot be reached)',
  description:
    'Readiness probe for load balancers and orchestrators: 200 once the database answers and start-up recovery has finished. While the service starts, drains or cannot reach its database it answers 503 not_ready, with the reason in the message.',
  tags: ['meta'],
  access: 'public',
  errors: ['not_ready'],
  needsDatabase: false,
  responses: { 200: Readiness },
  handler: async ({ services }) => {
    const { health, db } = services;
    if (health.draining) throw new ApiError('not_ready', 'The service is shutting down.');
    if (!health.recovered) throw new ApiError('not_ready', health.recoveryError ? `Recovery failed: ${health.recoveryError}` : 'Recovery has not finished.');
    // The ping is the news: a database found unreachable is marked down (requests then answer 503
    // service_unavailable), and one that answers again is marked up.
    const availability = availabilityOf(db);
    try {
      await withTimeout(db.ping(), PING_TIMEOUT_MS);
    } catch (error) {
      if (isDatabaseUnreachable(error)) availability.down(error);
      throw new ApiError('not_ready', availability.available ? 'The database does not answer.' : 'The database cannot be reached.');
    }
    availability.up();
    return { body: { status: 'ready', checks: { database: 'ok', recovery: 'done' }, catalog: { version: services.catalog.version } } };
  },
});

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out')), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

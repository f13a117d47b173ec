import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';

export const Liveness = Type.Object(
  {
    status: Type.Literal('live'),
  },
  { additionalProperties: false },
);

const LIVE = JSON.stringify({ status: 'live' });

export const getLiveness = defineRoute({
  method: 'GET',
  path: '/health/live',
  operationId: 'getLiveness',
  summary: 'Liveness probe: 200 while the process answers requests, whatever the state of its database or recovery',
  description:
    'Liveness probe for orchestrators: 200 as long as the process handles requests, with no check of the database, Redis or recovery (GET /health/ready covers those). A process that stops answering it should be restarted; one that answers it but not readiness should only be taken out of rotation. While the service shuts down it answers 503 not_ready, as every route does.',
  tags: ['meta'],
  access: 'public',
  errors: ['not_ready'],
  needsDatabase: false,
  responses: { 200: Liveness },
  handler: () => ({ raw: LIVE }),
});

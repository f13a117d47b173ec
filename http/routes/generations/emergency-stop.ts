import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';

export const EmergencyStopOut = Type.Object(
  {
    paused: Type.Boolean({ description: 'true: new generations are refused (503 generation_paused) and queued ones wait.' }),
    reason: Type.Union([Type.String(), Type.Null()], { description: "The operator's reason, while paused." }),
    since: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the pause began, while paused.' }),
  },
  { additionalProperties: false },
);

export const getEmergencyStop = defineRoute({
  method: 'GET',
  path: '/v1/generations/emergency-stop',
  operationId: 'getEmergencyStop',
  summary: 'Whether generation is paused platform-wide by the operator (any valid key or session)',
  description:
    'Whether generation is paused platform-wide by the operator; while it is, new generations are refused with 503 generation_paused and queued ones wait. Any valid API key or session may ask.',
  tags: ['generations'],
  access: 'auth',
  // Platform-wide: no workspace involved.
  keyWorkspace: 'none',
  responses: { 200: EmergencyStopOut },
  handler: ({ services }) => {
    const { paused, reason, since } = services.switches.generationPaused();
    return { headers: { 'Cache-Control': 'no-store' }, body: { paused, reason, since } };
  },
});

import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { workspaceOfGeneration } from '../../../persistence/stores/generations/reads.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { canRead } from './access.ts';
import { GenerationDetailOut, GenerationParams, toGenerationDetailOut } from './shape.ts';
import { workspaceOfRow } from '../../owner.ts';

export const cancelGeneration = defineRoute({
  method: 'POST',
  path: '/v1/generations/:id/cancel',
  operationId: 'cancelGeneration',
  summary: 'Cancel a generation that has not finished (409 once it has)',
  description: 'Cancels a generation that has not finished; its held credits are released. One that has already finished is 409.',
  tags: ['generations'],
  access: { scopes: ['generations.write'] },
  errors: ['conflict'],
  owner: workspaceOfRow('generations'),
  params: GenerationParams,
  query: Type.Object({ workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })) }, { additionalProperties: false }),
  responses: { 200: GenerationDetailOut },
  handler: async ({ params, query, auth, services }) => {
    const workspaceId = await workspaceOfGeneration(openUnit(services.db), params.id);
    // Another workspace's generation answers exactly like a missing one.
    if (!workspaceId || (query.workspaceId !== undefined && query.workspaceId !== workspaceId) || !(await canRead(openUnit(services.db), auth, workspaceId)))
      throw new ApiError('not_found', `No generation ${params.id}.`);
    const reply = await services.actors.ask('gen', params.id, { type: 'cancel', by: 'user' });
    switch (reply.kind) {
      case 'cancelled':
        return { body: toGenerationDetailOut(reply.generation) };
      case 'conflict':
        throw new ApiError('conflict', `The generation is ${reply.status}; only unfinished generations can be cancelled.`);
      case 'not_found':
        throw new ApiError('not_found', `No generation ${params.id}.`);
    }
  },
});

import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { GenerationEntity } from '../../../persistence/entities/generation.ts';
import { canRead } from './access.ts';
import { GenerationDetailOut, GenerationParams, toGenerationDetailOut } from './shape.ts';

export const getGeneration = defineRoute({
  method: 'GET',
  path: '/v1/generations/:id',
  operationId: 'getGeneration',
  summary: 'One generation with its event timeline; one of another workspace answers 404, as a missing one',
  description: 'Reads one generation with its event timeline and outputs. A generation of another workspace answers 404, as a missing one.',
  tags: ['generations'],
  access: { scopes: ['generations.read'] },
  // The generation names its workspace; a key naming another one is still 403 (below).
  params: GenerationParams,
  query: Type.Object(
    {
      workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Optional; when given, the generation must belong to it.' })),
    },
    { additionalProperties: false },
  ),
  responses: { 200: GenerationDetailOut },
  handler: async ({ auth, params, query, services }) => {
    if (auth?.kind === 'key' && query.workspaceId !== undefined && query.workspaceId !== auth.workspaceId) {
      throw new ApiError('forbidden', 'This API key belongs to another workspace.');
    }
    const em = services.db.em();
    const row = await em.findOne(GenerationEntity, { id: params.id });
    const visible = row !== null && (query.workspaceId === undefined || query.workspaceId === row.workspaceId) && (await canRead(em, auth, row.workspaceId));
    if (!row || !visible) throw new ApiError('not_found', `No generation ${params.id}.`);
    return { body: toGenerationDetailOut(row) };
  },
});

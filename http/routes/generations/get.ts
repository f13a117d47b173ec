import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { findGeneration } from '../../../persistence/stores/generations/reads.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { canRead } from './access.ts';
import { priceOf, routeOf } from './explain.ts';
import { readGenerationCharge } from '../../../persistence/stores/generations/charge.ts';
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
    const unit = openUnit(services.db);
    const row = await findGeneration(unit, params.id);
    const visible = row !== null && (query.workspaceId === undefined || query.workspaceId === row.workspaceId) && (await canRead(unit, auth, row.workspaceId));
    if (!row || !visible) throw new ApiError('not_found', `No generation ${params.id}.`);
    // Why it cost what it cost, and where it ran (docs/money.md): on the detail read only.
    const { charge, ledger } = await readGenerationCharge(unit, row.workspaceId, row.id);
    const catalog = services.catalog;
    return {
      body: {
        ...toGenerationDetailOut(row),
        price: priceOf(row, catalog, charge, ledger),
        route: routeOf(row, (id) => catalog.deployment(id)?.provider),
      },
    };
  },
});

import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { listKeys } from '../../../persistence/stores/keys.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openKeyWorkspace } from './access.ts';
import { ApiKeyOut, toApiKeyOut } from './shapes.ts';

export const listApiKeys = defineRoute({
  method: 'GET',
  path: '/v1/api-keys',
  operationId: 'listApiKeys',
  summary: 'List the API keys of a workspace, newest first, revoked ones included; never the plaintext (dashboard only; owners and admins)',
  description:
    'Lists the API keys of a workspace, newest first, with revoked and expired keys included; the answer never holds a plaintext key or its hash. Only owners and admins of the workspace may list keys.',
  tags: ['api-keys'],
  access: 'dashboard',
  errors: ['not_found'],
  query: Type.Object(
    {
      workspaceId: Type.String({ minLength: 1, maxLength: 64, description: 'The workspace whose keys to list.' }),
      ...PageQueryFields,
    },
    { additionalProperties: false },
  ),
  responses: { 200: Page(ApiKeyOut) },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    await openKeyWorkspace(unit, auth, query.workspaceId);
    const limit = query.limit ?? 20;
    let after: [Date, string] | undefined;
    if (query.cursor) {
      const [createdAt, id] = decodeCursor(query.cursor, ['string', 'string']) as [string, string];
      after = [new Date(createdAt), id];
    }
    // lastUsedAt noted by this node but not yet written would be missing; write it first.
    await services.keyUsage.flush();
    const rows = await listKeys(unit, query.workspaceId, { after, limit: limit + 1 });
    return { body: pageOf(rows, limit, (key) => [key.createdAt.toISOString(), key.id], toApiKeyOut) };
  },
});

import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { listEndpoints } from '../../../persistence/stores/webhooks/endpoints.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openWebhookWorkspace } from './access.ts';
import { toWebhookOut, WebhookOut } from './shapes.ts';

export const listWebhooks = defineRoute({
  method: 'GET',
  path: '/v1/webhooks',
  operationId: 'listWebhooks',
  summary: 'List the webhook endpoints of a workspace, newest first (never their secrets)',
  description: 'Lists the webhook endpoints of a workspace, newest first, never with their signing secrets.',
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  errors: ['not_found'],
  query: Type.Object(
    {
      workspaceId: Type.Optional(
        Type.String({ minLength: 1, maxLength: 64, description: 'The workspace; required when signed in, and an API key must name its own.' }),
      ),
      ...PageQueryFields,
    },
    { additionalProperties: false },
  ),
  responses: { 200: Page(WebhookOut) },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    const { workspace } = await openWebhookWorkspace(unit, auth, query.workspaceId);
    const limit = query.limit ?? 20;
    let after: [Date, string] | undefined;
    if (query.cursor) {
      const [createdAt, id] = decodeCursor(query.cursor, ['string', 'string']) as [string, string];
      after = [new Date(createdAt), id];
    }
    const rows = await listEndpoints(unit, workspace.id, { after, limit: limit + 1 });
    return { body: pageOf(rows, limit, (row) => [row.createdAt.toISOString(), row.id], toWebhookOut) };
  },
});

import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { WebhookEndpointEntity } from '../../../persistence/entities/webhook.ts';
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
    const em = services.db.em();
    const { workspace } = await openWebhookWorkspace(em, auth, query.workspaceId);
    const limit = query.limit ?? 20;
    const where: Record<string, unknown> = { workspaceId: workspace.id, deletedAt: null };
    if (query.cursor) {
      const [createdAt, id] = decodeCursor(query.cursor, ['string', 'string']) as [string, string];
      const at = new Date(createdAt);
      where.$or = [{ createdAt: { $lt: at } }, { createdAt: at, id: { $lt: id } }];
    }
    const rows = await em.find(WebhookEndpointEntity, where, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: limit + 1 });
    return { body: pageOf(rows, limit, (row) => [row.createdAt.toISOString(), row.id], toWebhookOut) };
  },
});

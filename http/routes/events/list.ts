import { Type, type Static } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { EVENT_RETENTION_MS } from '../../../actors/webhook/events.ts';
import { openWebhookWorkspace } from '../webhooks/access.ts';
import { EventType } from '../webhooks/shapes.ts';

const DAYS = EVENT_RETENTION_MS / 86_400_000;

export const EventOut = Type.Object(
  {
    id: Type.String({ description: 'evt_…; pass it to POST /v1/webhooks/:id/replay.' }),
    event: EventType,
    workspaceId: Type.String(),
    generationId: Type.Union([Type.String(), Type.Null()], { description: 'The generation of a generation event; null for an endpoint event.' }),
    data: Type.Record(Type.String(), Type.Unknown(), { description: "The delivery body's data, as sent." }),
    createdAt: Type.String({ format: 'date-time', description: "When the event happened (the body's createdAt)." }),
  },
  { additionalProperties: false },
);
type EventOut = Static<typeof EventOut>;

interface EventRow {
  id: string;
  workspace_id: string;
  generation_id: string | null;
  event_type: string;
  body_rest: string;
  created_at: Date | string;
}

function toEventOut(row: EventRow): EventOut {
  const body = JSON.parse(`{${row.body_rest}`) as { data: Record<string, unknown> };
  return {
    id: row.id,
    event: row.event_type as EventOut['event'],
    workspaceId: row.workspace_id,
    generationId: row.generation_id,
    data: body.data,
    createdAt: new Date(row.created_at).toISOString(),
  };
}

export const listEvents = defineRoute({
  method: 'GET',
  path: '/v1/events',
  operationId: 'listEvents',
  summary: `The workspace's emitted webhook events of the last ${DAYS} days, newest first, by type and date`,
  description: `Lists the events the workspace emitted (generations' terminal states, endpoints disabled), whether or not an endpoint received them, newest first; kept ${DAYS} days. Filter by type and by date (from included, to excluded). Scope webhooks.manage: this is the webhook feed, for replay to an endpoint.`,
  tags: ['webhooks'],
  access: { scopes: ['webhooks.manage'] },
  errors: ['not_found'],
  query: Type.Object(
    {
      workspaceId: Type.Optional(
        Type.String({ minLength: 1, maxLength: 64, description: 'The workspace; required when signed in, and an API key must name its own.' }),
      ),
      type: Type.Optional(EventType),
      from: Type.Optional(Type.String({ format: 'date-time', description: 'Events at or after this time.' })),
      to: Type.Optional(Type.String({ format: 'date-time', description: 'Events before this time.' })),
      ...PageQueryFields,
    },
    { additionalProperties: false },
  ),
  responses: { 200: Page(EventOut) },
  handler: async ({ auth, query, services }) => {
    const em = services.db.em();
    const { workspace } = await openWebhookWorkspace(em, auth, query.workspaceId);
    const limit = query.limit ?? 20;
    const where = ['workspace_id = ?'];
    const params: unknown[] = [workspace.id];
    if (query.type) {
      where.push('event_type = ?');
      params.push(query.type);
    }
    if (query.from) {
      where.push('created_at >= ?');
      params.push(new Date(query.from));
    }
    if (query.to) {
      where.push('created_at < ?');
      params.push(new Date(query.to));
    }
    // Ids are time-sortable: newest first is id descending, and the id alone is the keyset.
    if (query.cursor) {
      where.push('id < ?');
      params.push(decodeCursor(query.cursor, ['string'])[0]);
    }
    // Events of settlements decided but not yet committed would show a moment later; write them first.
    await services.writer.flush();
    const rows = await em.execute<EventRow[]>(
      `select id, workspace_id, generation_id, event_type, body_rest, created_at from webhook_events where ${where.join(' and ')} order by id desc limit ?`,
      [...params, limit + 1],
    );
    return { body: pageOf(rows, limit, (row) => [row.id], toEventOut) };
  },
});

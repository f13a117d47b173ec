import { Type, type Static } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { EVENT_RETENTION_MS } from '../../../actors/webhook/events.ts';
import { listWorkspaceEvents, type StoredEvent } from '../../../persistence/stores/webhooks/events.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
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

function toEventOut(event: StoredEvent): EventOut {
  const body = JSON.parse(`{${event.rest}`) as { data: Record<string, unknown> };
  return {
    id: event.id,
    event: event.eventType as EventOut['event'],
    workspaceId: event.workspaceId,
    generationId: event.generationId,
    data: body.data,
    createdAt: event.createdAt.toISOString(),
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
    const unit = openUnit(services.db);
    const { workspace } = await openWebhookWorkspace(unit, auth, query.workspaceId);
    const limit = query.limit ?? 20;
    // Ids are time-sortable: newest first is id descending, and the id alone is the keyset.
    const before = query.cursor ? (decodeCursor(query.cursor, ['string'])[0] as string) : undefined;
    // Events of settlements decided but not yet committed would show a moment later; write them first.
    await services.writer.flush();
    const rows = await listWorkspaceEvents(
      unit,
      workspace.id,
      { type: query.type, from: query.from ? new Date(query.from) : undefined, to: query.to ? new Date(query.to) : undefined, before },
      limit + 1,
    );
    return { body: pageOf(rows, limit, (row) => [row.id], toEventOut) };
  },
});

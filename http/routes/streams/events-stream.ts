import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { listOf, WorkspaceFeed } from '../../streams/feeds.ts';
import { MODES } from '../../../domain/catalog/models.ts';
import { GENERATION_STATUSES } from '../../../domain/generation-status.ts';

const list = (names: readonly string[], what: string) =>
  Type.String({
    minLength: 1,
    maxLength: 200,
    pattern: `^(?:${names.join('|')})(?:,(?:${names.join('|')}))*$`,
    description: `Only these ${what}, comma-separated (${names.join(', ')}).`,
  });

export const streamWorkspaceEvents = defineRoute({
  method: 'GET',
  path: '/v1/events/stream',
  operationId: 'streamWorkspaceEvents',
  summary: 'Server-Sent Events of every generation transition of a workspace, filterable by mode, status and project',
  description:
    'Sends `ready`, then a `transition` for each generation transition of the workspace as it commits (ids `<generationId>.<seq>`). ' +
    "Reconnecting with Last-Event-ID resumes within the node's window (the last 1,000 events of the workspace); an id outside it gets `reset` (read the list again). " +
    'A client that reads too slowly gets `cutoff` and the stream ends (reconnect with Last-Event-ID). See docs/streaming.md.',
  tags: ['streams'],
  access: { scopes: ['generations.read'] },
  query: Type.Object(
    {
      workspaceId: Type.Optional(
        Type.String({ minLength: 1, maxLength: 64, description: 'The workspace; required when signed in (an API key implies its own).' }),
      ),
      mode: Type.Optional(list(MODES, 'modes')),
      status: Type.Optional(list(GENERATION_STATUSES, 'statuses (of the transition)')),
      project: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Only generations of this project (the label given at creation).' })),
    },
    { additionalProperties: false },
  ),
  errors: ['not_found'],
  responses: { 200: null },
  eventStream: true,
  handler: async ({ auth, query, headers, services }) => {
    const feed = await WorkspaceFeed.open(services, auth, query.workspaceId, {
      modes: listOf(query.mode),
      statuses: listOf(query.status),
      project: query.project,
    });
    const lastEventId = headers['last-event-id']?.trim() || undefined;
    return { sse: { attach: (sink) => feed.attach(sink, lastEventId), cancel: () => feed.stop() } };
  },
});

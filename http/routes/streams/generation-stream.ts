import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { GenerationFeed } from '../../streams/feeds.ts';
import { GenerationParams } from '../generations/shape.ts';

/** Last-Event-ID of a generation stream: the index of a timeline entry. */
function lastSeqOf(header: string | undefined): number | undefined {
  if (header === undefined || !/^\d{1,6}$/.test(header.trim())) return undefined;
  return Number(header.trim());
}

export const streamGeneration = defineRoute({
  method: 'GET',
  path: '/v1/generations/:id/stream',
  operationId: 'streamGeneration',
  summary: 'Server-Sent Events of one generation: its state, each transition as it commits, its outputs, then the end',
  description:
    'Sends the generation as it is (`state`), then each transition as it commits (`transition`, the last one with the outputs), then `end`, and closes. ' +
    'Event ids are the timeline indexes: reconnecting with Last-Event-ID sends what was missed, without repeats; once the generation ended and the client saw its last event, the answer is 204 (EventSource then stops). ' +
    'A generation of another workspace answers 404, as a missing one. See docs/streaming.md.',
  tags: ['streams'],
  access: { scopes: ['generations.read'] },
  params: GenerationParams,
  query: Type.Object(
    {
      workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Optional; when given, the generation must belong to it.' })),
    },
    { additionalProperties: false },
  ),
  responses: { 200: null, 204: null },
  eventStream: true,
  handler: async ({ auth, params, query, headers, services }) => {
    const feed = await GenerationFeed.open(services, auth, params.id, query.workspaceId);
    const lastSeq = lastSeqOf(headers['last-event-id']);
    if (feed.finished && lastSeq !== undefined && lastSeq >= feed.lastSeq) {
      feed.cancel();
      return { status: 204 };
    }
    return { sse: { attach: (sink) => feed.attach(sink, lastSeq), cancel: () => feed.cancel() } };
  },
});

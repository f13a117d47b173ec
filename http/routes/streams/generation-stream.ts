import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { GenerationFeed, generationEventIdOf } from '../../streams/feeds.ts';
import { GenerationParams } from '../generations/shape.ts';

export const streamGeneration = defineRoute({
  method: 'GET',
  path: '/v1/generations/:id/stream',
  operationId: 'streamGeneration',
  summary: 'Server-Sent Events of one generation: its state, each transition as it commits, its outputs, then the end',
  description:
    'Sends the generation as it is (`state`), then each transition as it commits (`transition`, the last one with the outputs), and for a text answer its pieces as the provider streams them (`output`, before the terminal transition), then `end`, and closes. ' +
    'Event ids are the timeline indexes (`<index>.<piece>` for an `output`): reconnecting with Last-Event-ID sends what was missed, without repeats; once the generation ended and the client saw its last event, the answer is 204 (EventSource then stops). ' +
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
    const last = generationEventIdOf(headers['last-event-id']);
    if (feed.finished && last !== undefined && last.seq >= feed.lastSeq) {
      feed.cancel();
      return { status: 204 };
    }
    return { sse: { attach: (sink) => feed.attach(sink, last?.seq, last?.output), cancel: () => feed.cancel() } };
  },
});

/**
 * A text job's answer streams on the job API too (docs/streaming.md, `output`): its pieces as its provider
 * streams them, indexed, before its terminal transition, their concatenation its textOutput.
 */
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { openEventSource } from './support.ts';

t.test('GET /v1/generations/:id/stream carries output events before the end, joined equal to textOutput', async (t) => {
  // The local provider answers after a second: the stream is open before the first piece.
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '1000' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId);
  const created = await server.json('/v1/generations', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({
      workspaceId: user.workspaceId,
      mode: 'text_to_text',
      model: 'local/text-mini',
      params: { prompt: 'Write three sentences about lighthouses.' },
    }),
  });
  t.equal(created.status, 201);
  const id = created.body.id;
  const stream = openEventSource(server, `/v1/generations/${id}/stream?workspaceId=${user.workspaceId}`, withKey(key));
  t.teardown(() => stream.source.close());
  await stream.until(() => stream.events.some((e) => e.event === 'end'), 'the end');
  const outputs = stream.events.filter((e) => e.event === 'output');
  t.ok(outputs.length > 1, `the answer came in pieces (${outputs.length})`);
  t.same(
    outputs.map((e) => e.data.index),
    outputs.map((_, i) => i),
    'pieces indexed from 0, in order',
  );
  t.ok(
    outputs.every((e) => e.data.generationId === id && /^\d+\.\d+$/.test(e.id)),
    'each piece names its generation; its id resumes after it',
  );
  const lastOutput = stream.events.lastIndexOf(outputs[outputs.length - 1]!);
  const terminal = stream.events.findIndex((e) => e.event === 'transition' && e.data.status === 'succeeded');
  t.ok(terminal > lastOutput, 'every piece comes before the terminal transition');
  const text = outputs.map((e) => e.data.delta).join('');
  t.equal(text, stream.events[terminal]!.data.generation.textOutput, 'the pieces joined are the textOutput');
});

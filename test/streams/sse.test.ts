import t from 'tap';
import net from 'node:net';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, LIFECYCLE, openEventSource, readSse } from './support.ts';
import { cameTrue } from '../helpers/eventually.ts';

// One server for the file: a provider slow enough to connect while a job runs, pings every 300 ms,
// and a small bound on what waits for a slow reader.
const server = await startTestServer(t, {
  env: { LOCAL_PROVIDER_LATENCY_MS: '400', STREAM_PING_MS: '300', STREAM_MAX_BUFFER_BYTES: '65536', RATE_LIMIT_FREE: '100000' },
});
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
const auth = { authorization: `Bearer ${key}` };
const ws = user.workspaceId;

t.test('a generation stream sends the state, each transition in order with the outputs, then end; EventSource sees it all once', async (t) => {
  const gen = await createGeneration(server, key, ws);
  const es = openEventSource(server, `/v1/generations/${gen.id}/stream?workspaceId=${ws}`, auth);
  await es.until(() => es.events.some((e) => e.event === 'end'), 'end');
  es.close();
  const [state, ...rest] = es.events;
  t.equal(state!.event, 'state', 'the current state comes first');
  t.equal(state!.data.id, gen.id);
  const firstSeq = Number(state!.id);
  t.equal(firstSeq, state!.data.timeline.length - 1, 'the state is numbered by its last timeline entry');
  const transitions = rest.filter((e) => e.event === 'transition');
  t.same(
    transitions.map((e) => Number(e.id)),
    transitions.map((_, i) => firstSeq + 1 + i),
    'ids follow the timeline, without gaps or repeats',
  );
  const seen = [...state!.data.timeline.map((e: { status: string }) => e.status), ...transitions.map((e) => e.data.status)];
  t.same(seen, LIFECYCLE, 'the state and the transitions make the whole lifecycle, once each');
  const last = transitions.at(-1)!;
  t.equal(last.data.generation.status, 'succeeded');
  t.type(last.data.generation.textOutput, 'string', 'the final transition carries the outputs');
  t.equal(rest.at(-1)!.event, 'end', 'end is the last event');
  t.same(rest.at(-1)!.data, { generationId: gen.id, status: 'succeeded' });
});

t.test('Last-Event-ID resumes a generation stream after the given entry; past the end the answer is 204', async (t) => {
  const gen = await createGeneration(server, key, ws);
  // Resumed from entry 0 while it runs: every later entry comes, once, in order.
  const resumed = await readSse(server, `/v1/generations/${gen.id}/stream?workspaceId=${ws}`, { ...auth, 'last-event-id': '0' });
  t.equal(resumed.status, 200);
  t.equal(resumed.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  t.match(resumed.text, /^retry: \d+\n\n/, 'a reconnect delay first');
  const ids = resumed.events.filter((e) => e.event === 'transition').map((e) => Number(e.id));
  t.same(ids, [1, 2, 3, 4], 'entries 1 to 4, none repeated, none missed');
  t.equal(resumed.events.at(-1)!.event, 'end');

  // After the job ended: from entry 2, entries 3 and 4 then end; from the last one, 204 (EventSource stops).
  const late = await readSse(server, `/v1/generations/${gen.id}/stream?workspaceId=${ws}`, { ...auth, 'last-event-id': '2' });
  t.same(
    late.events.map((e) => [e.event, e.id]),
    [
      ['transition', '3'],
      ['transition', '4'],
      ['end', ''],
    ],
  );
  const over = await server.fetch(`/v1/generations/${gen.id}/stream?workspaceId=${ws}`, { headers: { ...auth, 'last-event-id': '4' } });
  t.equal(over.status, 204);
  const fresh = await readSse(server, `/v1/generations/${gen.id}/stream?workspaceId=${ws}`, { ...auth, 'last-event-id': 'junk' });
  t.same(
    fresh.events.map((e) => e.event),
    ['state', 'end'],
    'an id that is not an entry gets the state',
  );
});

t.test("refusals are the REST reads': no key 401, no scope 403, another workspace 404 as a missing one", async (t) => {
  const gen = await createGeneration(server, key, ws);
  const path = `/v1/generations/${gen.id}/stream?workspaceId=${ws}`;
  const none = await server.json(path);
  t.equal(none.status, 401);
  t.equal(none.body.error.code, 'unauthenticated');
  const noScope = await createKey(server, user.cookie, ws, ['files.write']);
  const scoped = await server.json(path, { headers: { authorization: `Bearer ${noScope.key}` } });
  t.equal(scoped.status, 403);
  t.equal(scoped.body.error.code, 'forbidden');
  const noWorkspace = await server.json(`/v1/generations/${gen.id}/stream`, { headers: auth });
  t.equal(noWorkspace.status, 403, 'a key must name its workspace');
  const other = await signUp(server);
  const otherKey = await createKey(server, other.cookie, other.workspaceId, ['generations.read']);
  const foreign = await server.json(`/v1/generations/${gen.id}/stream?workspaceId=${other.workspaceId}`, {
    headers: { authorization: `Bearer ${otherKey.key}` },
  });
  t.equal(foreign.status, 404, "another workspace's generation answers like a missing one");
  t.equal(foreign.body.error.code, 'not_found');
  const missing = await server.json(`/v1/generations/gen_missing/stream?workspaceId=${other.workspaceId}`, {
    headers: { authorization: `Bearer ${otherKey.key}` },
  });
  t.same({ status: missing.status, code: missing.body.error.code }, { status: foreign.status, code: foreign.body.error.code });
  const naming = await server.json(`/v1/events/stream?workspaceId=${ws}`, { headers: { authorization: `Bearer ${otherKey.key}` } });
  t.equal(naming.status, 403, 'a key naming another workspace');
  const stranger = await server.json(`/v1/events/stream?workspaceId=${ws}`, { headers: { cookie: other.cookie } });
  t.equal(stranger.status, 404, 'a session outside the workspace');
  const bad = await server.json(`/v1/events/stream?workspaceId=${ws}&status=done`, { headers: auth });
  t.equal(bad.status, 400);
  t.equal(bad.body.error.code, 'validation_error');
  // The client library sees the refusal and does not reconnect.
  const es = openEventSource(server, path, {});
  await es.until(() => es.errors.length > 0, 'the refusal');
  t.equal(es.errors[0]!.code, 401);
  es.close();
});

t.test('the workspace stream: filters, Last-Event-ID within the window, reset outside it; a session may follow it', async (t) => {
  const es = openEventSource(server, `/v1/events/stream?workspaceId=${ws}&mode=text_to_text&status=queued,succeeded`, auth);
  await es.until(() => es.events.some((e) => e.event === 'ready'), 'ready');
  const image = await createGeneration(server, key, ws, { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: 'a cat' } });
  const first = await createGeneration(server, key, ws);
  await es.until(() => es.events.some((e) => e.data.generationId === first.id && e.data.status === 'succeeded'), 'the first job done');
  const mine = es.events.filter((e) => e.event === 'transition');
  t.notOk(
    mine.some((e) => e.data.generationId === image.id),
    'another mode is filtered out',
  );
  t.same(
    mine.filter((e) => e.data.generationId === first.id).map((e) => [e.id, e.data.status]),
    [
      [`${first.id}.0`, 'queued'],
      [`${first.id}.4`, 'succeeded'],
    ],
    'only the statuses asked for',
  );
  t.equal(mine.at(-1)!.data.generation.status, 'succeeded');
  es.close();

  // Disconnected: a job runs meanwhile; resuming from the last id seen sends its events, and nothing before.
  const lastId = mine.at(-1)!.id;
  const second = await createGeneration(server, key, ws);
  const poll = async () => (await server.json(`/v1/generations/${second.id}?workspaceId=${ws}`, { headers: auth })).body.status;
  await cameTrue(async () => (await poll()) === 'succeeded', Date.now() + 60_000, 100);
  const resumed = await readSse(server, `/v1/events/stream?workspaceId=${ws}&mode=text_to_text`, { cookie: user.cookie, 'last-event-id': lastId }, (events) =>
    events.some((e) => e.data.generationId === second.id && e.data.status === 'succeeded'),
  );
  const ids = resumed.events.filter((e) => e.event === 'transition').map((e) => e.id);
  t.same(
    ids,
    LIFECYCLE.map((_, seq) => `${second.id}.${seq}`),
    "the missed job's events, in order, once; none of the first",
  );

  const reset = await readSse(server, `/v1/events/stream?workspaceId=${ws}`, { ...auth, 'last-event-id': 'gen_unknown.3' }, (events) => events.length >= 2);
  t.same(
    reset.events.map((e) => e.event),
    ['ready', 'reset'],
    'an id outside the window: reset',
  );
});

t.test('idle streams get comments', async (t) => {
  const idle = await readSse(server, `/v1/events/stream?workspaceId=${ws}`, auth, (_, text) => (text.match(/: ping\n\n/g) ?? []).length >= 2);
  t.ok((idle.text.match(/: ping\n\n/g) ?? []).length >= 2, 'pings while nothing happens');
});

t.test('200 concurrent streams each get every event of a job', async (t) => {
  const streams = Array.from({ length: 200 }, () => openEventSource(server, `/v1/events/stream?workspaceId=${ws}`, auth));
  for (const es of streams) await es.until(() => es.events.some((e) => e.event === 'ready'), 'ready', 120_000);
  t.equal(server.http.openStreams() >= 200, true, 'the hub holds them');
  const gen = await createGeneration(server, key, ws);
  for (const es of streams)
    await es.until(() => es.events.some((e) => e.data.generationId === gen.id && e.data.status === 'succeeded'), 'the job done', 120_000);
  const complete = streams.filter(
    (es) =>
      JSON.stringify(es.events.filter((e) => e.data.generationId === gen.id).map((e) => e.id)) ===
      JSON.stringify(LIFECYCLE.map((_, seq) => `${gen.id}.${seq}`)),
  );
  t.equal(complete.length, 200, 'every stream: the five events, in order, once');
  for (const es of streams) es.close();
});

t.test('a reader that does not read is cut off with a final event instead of being buffered without bound', async (t) => {
  const socket = net.connect(server.port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(`GET /v1/events/stream?workspaceId=${ws} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`);
  const chunks: Buffer[] = [];
  let received = 0;
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    received += chunk.length;
  };
  socket.on('data', onData);
  const ended = new Promise((resolve) => socket.once('close', resolve));
  // Wait for its head, then stop reading.
  await cameTrue(() => Buffer.concat(chunks).toString().includes('event: ready'), Date.now() + 30_000, 50);
  socket.pause();
  const before = server.http.openStreams();
  // 64 KiB events, far past what the socket buffers hold and the 64 KiB bound.
  const detail = 'x'.repeat(64 * 1024);
  let injected = 0;
  for (let i = 0; i < 600; i++) {
    server.services.live.inject({
      workspaceId: ws,
      generationId: 'gen_synthetic',
      seq: i,
      status: 'running',
      at: new Date().toISOString(),
      detail,
      mode: 'text_to_text',
      project: null,
      terminal: false,
      generation: {},
    });
    injected += detail.length;
    if (i % 20 === 19) await new Promise((resolve) => setImmediate(resolve));
  }
  t.ok(server.http.openStreams() < before, 'the stream left the hub once cut off');
  socket.resume();
  await ended;
  const text = Buffer.concat(chunks).toString();
  t.ok(received < injected / 2, `far less was sent (${received} bytes) than published (${injected})`);
  t.ok(text.includes('event: cutoff'), 'the final event says why');
  t.ok(text.lastIndexOf('event: cutoff') > text.lastIndexOf('event: transition'), 'cutoff is the last event');
  socket.destroy();
});

t.test("a node's shutdown closes its streams with a reconnect hint", async (t) => {
  const other = await startTestServer(t, { env: { STREAM_PING_MS: '60000' } });
  const owner = await signUp(other);
  const otherKey = await createKey(other, owner.cookie, owner.workspaceId, ['generations.read']);
  const reading = readSse(other, `/v1/events/stream?workspaceId=${owner.workspaceId}`, { authorization: `Bearer ${otherKey.key}` });
  await cameTrue(() => other.http.openStreams() !== 0, Date.now() + 30_000, 50);
  await other.stop();
  const { text, events } = await reading;
  t.match(text, /retry: \d+\nid: |retry: \d+\nevent: shutdown/, 'a retry: hint with the last event');
  t.equal(events.at(-1)!.event, 'shutdown');
  t.type(events.at(-1)!.data.retryMs, 'number');
});

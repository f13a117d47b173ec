import t from 'tap';
import WebSocket from 'ws';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, LIFECYCLE } from './support.ts';
import { eventually, NotMetError } from '../helpers/eventually.ts';

const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '400', RATE_LIMIT_FREE: '100000', STREAM_MAX_BUFFER_BYTES: '65536' } });
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
const ws = user.workspaceId;

/** A `ws` client on /v1/ws collecting messages, with a wait on what it received. */
async function connect(target: TestServer, headers: Record<string, string> = {}) {
  const socket = new WebSocket(`${target.url.replace('http', 'ws')}/v1/ws`, { headers });
  const messages: any[] = [];
  let closed: { code: number; reason: string } | undefined;
  let refused: number | undefined;
  socket.on('message', (data) => messages.push(JSON.parse(data.toString())));
  socket.on('close', (code, reason) => {
    closed = { code, reason: reason.toString() };
  });
  socket.on('unexpected-response', (_, response) => {
    refused = response.statusCode;
    socket.terminate();
  });
  socket.on('error', () => {});
  await new Promise<void>((resolve) => {
    socket.once('open', () => resolve());
    socket.once('close', () => resolve());
    socket.once('unexpected-response', () => resolve());
  });
  return {
    socket,
    messages,
    get closed() {
      return closed;
    },
    get refused() {
      return refused;
    },
    send: (message: Record<string, unknown>) => socket.send(JSON.stringify(message)),
    async until(done: () => boolean, what: string, ms = 60_000) {
      await eventually(done, { timeoutMs: ms, everyMs: 50, what }).catch((error) => {
        throw error instanceof NotMetError ? new NotMetError(`${error.message}; got ${JSON.stringify(messages)} closed ${JSON.stringify(closed)}`) : error;
      });
    },
  };
}

t.test('authenticated by header: a generation subscription gets the state, each transition in order, then end', async (t) => {
  const client = await connect(server, { authorization: `Bearer ${key}` });
  await client.until(() => client.messages.some((m) => m.type === 'authenticated'), 'authenticated');
  const gen = await createGeneration(server, key, ws);
  client.send({ type: 'subscribe', id: 'g', generationId: gen.id, workspaceId: ws });
  await client.until(() => client.messages.some((m) => m.subscription === 'g' && m.event === 'end'), 'end');
  const events = client.messages.filter((m) => m.type === 'event' && m.subscription === 'g');
  t.equal(events[0].event, 'state');
  const first = Number(events[0].id);
  const transitions = events.filter((m) => m.event === 'transition');
  t.same(
    transitions.map((m) => Number(m.id)),
    transitions.map((_, i) => first + 1 + i),
    'numbered by the timeline, without gaps',
  );
  t.same([...events[0].data.timeline.map((e: { status: string }) => e.status), ...transitions.map((m) => m.data.status)], LIFECYCLE);
  t.type(transitions.at(-1).data.generation.textOutput, 'string', 'the outputs');
  t.equal(events.at(-1).event, 'end');
  t.equal(client.closed, undefined, 'the connection stays for other subscriptions');
  client.socket.close();
});

t.test('authenticated by the first message: the workspace subscription, filtered, resumable with lastEventId', async (t) => {
  const client = await connect(server);
  client.send({ type: 'auth', apiKey: key });
  await client.until(() => client.messages.some((m) => m.type === 'authenticated'), 'authenticated');
  client.send({ type: 'subscribe', id: 'w', workspaceId: ws, status: 'queued,succeeded' });
  await client.until(() => client.messages.some((m) => m.type === 'subscribed'), 'subscribed');
  const gen = await createGeneration(server, key, ws);
  await client.until(
    () => client.messages.some((m) => m.event === 'transition' && m.data.generationId === gen.id && m.data.status === 'succeeded'),
    'the job done',
  );
  const mine = client.messages.filter((m) => m.event === 'transition' && m.data.generationId === gen.id);
  t.same(
    mine.map((m) => m.id),
    [`${gen.id}.0`, `${gen.id}.4`],
  );
  client.send({ type: 'subscribe', id: 'again', workspaceId: ws, lastEventId: `${gen.id}.0` });
  await client.until(() => client.messages.some((m) => m.subscription === 'again' && m.id === `${gen.id}.4`), 'the replay');
  t.same(
    client.messages.filter((m) => m.subscription === 'again' && m.event === 'transition' && m.data.generationId === gen.id).map((m) => m.id),
    [1, 2, 3, 4].map((seq) => `${gen.id}.${seq}`),
    'after the id given, once each',
  );
  client.socket.close();
});

t.test("refusals: a bad key, no scope, another workspace's generation (like a missing one), a key naming no workspace", async (t) => {
  const bad = await connect(server, { authorization: 'Bearer gs_live_nope' });
  t.equal(bad.refused, 401, 'a bad key in the header is refused before the upgrade');
  const byMessage = await connect(server);
  byMessage.send({ type: 'auth', apiKey: 'gs_live_nope' });
  await byMessage.until(() => byMessage.closed !== undefined, 'closed');
  t.equal(byMessage.closed!.code, 1008);
  t.equal(byMessage.messages[0].error.code, 'unauthenticated');
  const early = await connect(server);
  early.send({ type: 'subscribe', id: 'x', workspaceId: ws });
  await early.until(() => early.closed !== undefined, 'closed');
  t.equal(early.closed!.code, 1008, 'a subscription before authentication');

  const noScope = await createKey(server, user.cookie, ws, ['files.write']);
  const scoped = await connect(server, { authorization: `Bearer ${noScope.key}` });
  t.equal(scoped.refused, 403, 'a key without generations.read');

  const other = await signUp(server);
  const otherKey = await createKey(server, other.cookie, other.workspaceId, ['generations.read']);
  const gen = await createGeneration(server, key, ws);
  const client = await connect(server, { authorization: `Bearer ${otherKey.key}` });
  client.send({ type: 'subscribe', id: 'a', generationId: gen.id, workspaceId: other.workspaceId });
  client.send({ type: 'subscribe', id: 'b', generationId: 'gen_missing', workspaceId: other.workspaceId });
  client.send({ type: 'subscribe', id: 'c', workspaceId: ws });
  client.send({ type: 'subscribe', id: 'd', generationId: gen.id });
  await client.until(() => client.messages.filter((m) => m.type === 'error').length >= 4, 'four refusals');
  const errorOf = (id: string) => client.messages.find((m) => m.type === 'error' && m.subscription === id).error.code;
  t.equal(errorOf('a'), 'not_found', "another workspace's generation");
  t.equal(errorOf('b'), errorOf('a'), 'answers like a missing one');
  t.equal(errorOf('c'), 'forbidden', 'another workspace named');
  t.equal(errorOf('d'), 'forbidden', 'no workspace named');
  client.socket.close();

  const foreignCookie = await connect(server, { cookie: user.cookie, origin: 'https://evil.example' });
  t.equal(foreignCookie.refused, 403, 'a session cookie from a foreign Origin');
});

t.test('a client that does not read is closed with 1013 past the bound, not buffered without bound', async (t) => {
  const client = await connect(server, { authorization: `Bearer ${key}` });
  client.send({ type: 'subscribe', id: 'w', workspaceId: ws });
  await client.until(() => client.messages.some((m) => m.type === 'subscribed'), 'subscribed');
  client.socket.pause();
  const detail = 'x'.repeat(64 * 1024);
  for (let i = 0; i < 600 && server.http.openStreams() > 0; i++) {
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
    if (i % 20 === 19) await new Promise((resolve) => setImmediate(resolve));
  }
  t.equal(server.http.openStreams(), 0, 'the connection left the hub');
  client.socket.resume();
  await client.until(() => client.closed !== undefined, 'closed');
  t.equal(client.closed!.code, 1013, 'try again later: the client resumes with lastEventId');
  const received = client.messages.filter((m) => m.event === 'transition').length;
  t.ok(received < 300, `${received} of the events reached it before the cut`);
});

t.test("a node's shutdown closes WebSockets with 1012", async (t) => {
  const other = await startTestServer(t);
  const owner = await signUp(other);
  const otherKey = await createKey(other, owner.cookie, owner.workspaceId, ['generations.read']);
  const client = await connect(other, { authorization: `Bearer ${otherKey.key}` });
  client.send({ type: 'subscribe', id: 'w', workspaceId: owner.workspaceId });
  await client.until(() => client.messages.some((m) => m.type === 'subscribed'), 'subscribed');
  await other.stop();
  await client.until(() => client.closed !== undefined, 'closed');
  t.equal(client.closed!.code, 1012, 'service restart: reconnect');
  t.equal(client.messages.at(-1).event, 'shutdown');
});

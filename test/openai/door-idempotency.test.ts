/**
 * `Idempotency-Key` on POST /openai/v1/chat/completions (docs/openai-compatible.md, Idempotency), as on POST
 * /v1/generations (test/generations/idempotency.test.ts): the same key and body, sent while the first request's
 * job runs, answer that job again (whole: X-Generation-Id the same and `Idempotent-Replayed: true`; streamed:
 * the same completion id, followed from where the job is), with one generation, one call to the provider and
 * one charge; the same key with another body is 409 `idempotency_key_reused` and makes nothing. In front of
 * an OpenAI deployment (the strict fake) with a token-priced model.
 */
import t, { type Test } from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { STARTING_CREDITS, writeTestCatalog } from '../helpers/provider-service.ts';
import { startFakeOpenAi } from '../fakes/openai.ts';
import { ledgerByGeneration, moneyOf, serverQuery } from '../generations/flow.ts';
import { tokenCharge } from '../../domain/catalog/pricing.ts';

const fake = await startFakeOpenAi();
t.teardown(() => fake.close());

const TERMS = { inputMicroPer1k: 250 * 1_000_000, outputMicroPer1k: 500 * 1_000_000 };

const catalogFile = writeTestCatalog(t, [
  {
    id: 'acme/writer',
    mode: 'text_to_text',
    price: { per: 'tokens', inputPer1k: 250, outputPer1k: 500 },
    parameters: { prompt: { required: true }, systemPrompt: {}, temperature: {}, maxTokens: { maximum: 512, default: 256 } },
    deployments: [{ id: 'writer-openai', provider: 'openai', target: { model: 'gpt-4o-mini' } }],
  },
]);

const server = await startTestServer(t, {
  env: { CATALOG_FILE: catalogFile, OPENAI_BASE_URL: fake.url, OPENAI_API_KEY: fake.apiKey, OPENAI_TIMEOUT_MS: '10000', ALLOW_PRIVATE_EGRESS: 'true' },
});
const query = serverQuery(server);

interface ChatChunk {
  id: string;
  choices: Array<{ delta: { content?: string }; finish_reason: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

/** The `data:` events of a text/event-stream body as they arrive, parsed (`[DONE]` as the string). */
async function* events(response: Response): AsyncGenerator<ChatChunk | '[DONE]' | { error: unknown }> {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(bytes, { stream: true });
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice('data: '.length))
        .join('\n');
      if (data === '') continue;
      yield data === '[DONE]' ? '[DONE]' : JSON.parse(data);
    }
  }
}

/** Reads a whole streamed answer: its text, its usage chunk, whether it ended with [DONE]. */
async function readStream(response: Response, onFirstPiece?: (chunk: ChatChunk) => void) {
  const chunks: ChatChunk[] = [];
  let done = false;
  let text = '';
  for await (const event of events(response)) {
    if (event === '[DONE]') {
      done = true;
      continue;
    }
    if ('error' in event) throw new Error(`an error event: ${JSON.stringify(event)}`);
    chunks.push(event);
    const piece = event.choices[0]?.delta.content ?? '';
    if (piece !== '' && text === '') onFirstPiece?.(event);
    text += piece;
  }
  return { chunks, text, done, usage: chunks.at(-1)?.usage ?? null, ids: [...new Set(chunks.map((c) => c.id))] };
}

async function workspace() {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId);
  const chat = (body: Record<string, unknown>, idempotencyKey: string) =>
    server.fetch('/openai/v1/chat/completions', {
      method: 'POST',
      headers: withKey(key, { 'idempotency-key': idempotencyKey }),
      body: JSON.stringify(body),
    });
  const generations = async () =>
    (await server.json(`/v1/generations?workspaceId=${user.workspaceId}&limit=100`, { headers: withKey(key) })).body.data as Array<{
      id: string;
      status: string;
      credits: number;
      usage?: { inputTokens: number; outputTokens: number };
    }>;
  return { user, key, chat, generations };
}

/** How many chat calls reached the provider (the fake) so far. */
const upstreamCalls = () => fake.received.filter((r) => r.path.endsWith('/chat/completions')).length;

/**
 * How many times the node started following each generation in process (runtime/live-events.ts), as a door
 * request does for the job it answers (a replay too): observed on the service's LiveEvents, which goes on as it was.
 */
const follows = new Map<string, number>();
const followWaiters = new Set<() => void>();
{
  const live = server.services.live;
  const follow = live.follow;
  live.follow = function (this: typeof live, generationId, listener) {
    const unfollow = follow.call(this, generationId, listener);
    follows.set(generationId, (follows.get(generationId) ?? 0) + 1);
    for (const wake of [...followWaiters]) wake();
    return unfollow;
  };
  t.teardown(() => {
    live.follow = follow;
  });
}

/** Resolves once generation `id` was followed `times` times on the node. */
function followed(id: string, times: number): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if ((follows.get(id) ?? 0) < times) return;
      followWaiters.delete(check);
      resolve();
    };
    followWaiters.add(check);
    check();
  });
}

/**
 * A gate the fake waits on before sending the stream's event `at`; `running` resolves when the stream's second
 * event is due (the job runs at its provider).
 */
function heldStream(at: number) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const pace = (index: number) => {
    if (index === 1) started();
    return index === at ? opened : undefined;
  };
  return { pace, open, running };
}

/** One generation, reserved once and captured once; balance equals ledger; charged its provider usage exactly. */
async function chargedOnce(t: Test, ws: Awaited<ReturnType<typeof workspace>>, id: string) {
  const list = await ws.generations();
  t.same(
    list.map((g) => g.id),
    [id],
    'one generation in the list, the first request one',
  );
  const g = list[0]!;
  t.equal(g.status, 'succeeded');
  const charge = tokenCharge(TERMS, g.usage!, 1_000_000, 0n).credits;
  t.ok(charge > 0, 'a charge to check');
  t.equal(g.credits, charge, 'charged its usage at the catalog price');
  const ledger = await ledgerByGeneration(query, ws.user.workspaceId);
  t.same(Object.keys(ledger), [id], 'the ledger holds entries of that generation only');
  t.equal(ledger[id]!.reserve, 1, 'reserved once');
  t.equal(ledger[id]!.capture, 1, 'captured once');
  const money = await moneyOf(query, ws.user.workspaceId);
  t.equal(STARTING_CREDITS - money.available, charge, 'the balance moved by one charge');
  t.equal(money.available, money.ledgerAvailable, 'balance equals ledger');
  t.same(money.reservations, [], 'no reservation left open');
}

t.test('whole answers: the same key and body, sent while the first job runs, answer that job; charged once', async (t) => {
  const ws = await workspace();
  const body = { model: 'acme/writer', messages: [{ role: 'user', content: 'Name three rivers.' }], max_tokens: 60, temperature: 0.2 };
  const held = heldStream(3);
  fake.next('/chat/completions', { kind: 'stream-paced', pace: held.pace });
  const before = upstreamCalls();
  const first = ws.chat(body, 'chat-1');
  await held.running;
  const [row] = await query<{ id: string }>('select id from generations where workspace_id = ?', [ws.user.workspaceId]);
  const id = row!.id;
  const again = ws.chat(body, 'chat-1');
  // The same request with its keys in another order is the same request.
  const reordered = ws.chat({ temperature: 0.2, max_tokens: 60, messages: body.messages, model: 'acme/writer' }, 'chat-1');
  // The provider goes on once both replays follow the job (the first request follows it too).
  await followed(id, 3);
  held.open();

  const firstAnswer = await first;
  t.equal(firstAnswer.status, 200);
  t.equal(firstAnswer.headers.get('idempotent-replayed'), null, 'the first answer is not a replay');
  t.equal(firstAnswer.headers.get('x-generation-id'), id);
  const firstBody = (await firstAnswer.json()) as any;
  t.equal(firstBody.id, `chatcmpl-${id}`);
  for (const [what, answer] of [
    ['the same body', await again],
    ['the same body, keys reordered', await reordered],
  ] as const) {
    t.equal(answer.status, 200, what);
    t.equal(answer.headers.get('idempotent-replayed'), 'true', `${what}: Idempotent-Replayed`);
    t.equal(answer.headers.get('x-generation-id'), id, `${what}: X-Generation-Id is the first job`);
    const replayBody = (await answer.json()) as any;
    t.equal(replayBody.id, firstBody.id);
    t.same(replayBody.choices, firstBody.choices, `${what}: the same answer`);
    t.same(replayBody.usage, firstBody.usage, `${what}: the same usage`);
  }
  t.equal(upstreamCalls() - before, 1, 'one call to the provider');
  await chargedOnce(t, ws, id);
});

t.test('the same key with another body is 409 idempotency_key_reused, and makes and charges nothing', async (t) => {
  const ws = await workspace();
  const body = { model: 'acme/writer', messages: [{ role: 'user', content: 'Name a mountain.' }] };
  const first = await ws.chat(body, 'chat-2');
  t.equal(first.status, 200);
  const id = first.headers.get('x-generation-id')!;
  await first.arrayBuffer();
  const before = upstreamCalls();
  const others: Array<[string, Record<string, unknown>]> = [
    ['another message', { ...body, messages: [{ role: 'user', content: 'Name a valley.' }] }],
    ['another field', { ...body, max_tokens: 20 }],
    ['streamed instead of whole', { ...body, stream: true }],
  ];
  for (const [what, other] of others) {
    const refused = await ws.chat(other, 'chat-2');
    t.equal(refused.status, 409, what);
    t.equal(refused.headers.get('idempotent-replayed'), null);
    const error = ((await refused.json()) as any).error;
    t.same(Object.keys(error).sort(), ['code', 'message', 'param', 'type'], "OpenAI's error shape");
    t.equal(error.code, 'idempotency_key_reused', what);
    t.equal(error.type, 'invalid_request_error');
    t.match(error.message, /Idempotency-Key/);
  }
  // And a job API request under the same key is another request too.
  const jobApi = await server.json('/v1/generations', {
    method: 'POST',
    headers: withKey(ws.key, { 'idempotency-key': 'chat-2' }),
    body: JSON.stringify({ workspaceId: ws.user.workspaceId, mode: 'text_to_text', model: 'acme/writer', params: { prompt: 'Name a mountain.' } }),
  });
  t.equal(jobApi.status, 409, 'POST /v1/generations with the key of a door request');
  t.equal(upstreamCalls(), before, 'nothing reached the provider');
  await chargedOnce(t, ws, id);
});

t.test('streamed: a replay while the first job streams follows that job from where it is; one job, charged once', async (t) => {
  const ws = await workspace();
  const body = {
    model: 'acme/writer',
    messages: [{ role: 'user', content: 'Describe the sea at night, in a long sentence of many words.' }],
    stream: true,
    stream_options: { include_usage: true },
  };
  const held = heldStream(4);
  fake.next('/chat/completions', { kind: 'stream-paced', pace: held.pace });
  const before = upstreamCalls();
  const first = await ws.chat(body, 'chat-3');
  t.equal(first.status, 200);
  t.match(first.headers.get('content-type'), /^text\/event-stream/);
  // The first answer is held by the provider after its first pieces: the replay is sent while the job streams,
  // and the provider goes on once the replay follows the job in process (the door's follow of its id).
  let replay: Promise<Response> | undefined;
  const whole = await readStream(first, (chunk) => {
    replay = ws.chat(body, 'chat-3');
    void followed(chunk.id.slice('chatcmpl-'.length), 2).then(held.open);
  });
  t.ok(replay, 'the replay was sent while the first answer was streaming');
  const replayed = await replay!;
  t.equal(replayed.status, 200);
  const again = await readStream(replayed);
  t.equal(whole.ids.length, 1);
  const id = whole.ids[0]!.slice('chatcmpl-'.length);
  t.same(again.ids, whole.ids, 'the replay streams the same completion: the first job');
  t.ok(whole.done && again.done, 'both end with [DONE]');
  t.ok(whole.text.endsWith(again.text), 'the replay carries the answer from where the job was');
  t.same(again.usage, whole.usage, 'the same usage chunk');
  t.equal(upstreamCalls() - before, 1, 'one call to the provider');
  const g = (await ws.generations())[0]!;
  t.equal(g.id, id);
  t.equal(whole.text, (await server.json(`/v1/generations/${id}?workspaceId=${ws.user.workspaceId}`, { headers: withKey(ws.key) })).body.textOutput);
  t.same(whole.usage, {
    prompt_tokens: g.usage!.inputTokens,
    completion_tokens: g.usage!.outputTokens,
    total_tokens: g.usage!.inputTokens + g.usage!.outputTokens,
  });
  await chargedOnce(t, ws, id);
});

/**
 * A second real client on the OpenAI-compatible door (docs/openai-compatible.md): the Vercel AI SDK, its
 * `@ai-sdk/openai-compatible` provider with `ai`'s streamText and generateText, changing only the base URL and
 * the key. In front of an OpenAI deployment (the strict fake, test/fakes/openai.ts) with a token-priced model:
 * text streams through as the provider sends it, the usage the SDK reports is the provider's, the job is
 * charged exactly that, and the SDK's errors carry the door's statuses and messages.
 */
import t from 'tap';
import { APICallError, generateText, streamText } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { STARTING_CREDITS, writeTestCatalog } from '../helpers/provider-service.ts';
import { startFakeOpenAi } from '../fakes/openai.ts';
import { moneyOf, serverQuery } from '../generations/flow.ts';
import { tokenCharge } from '../../domain/catalog/pricing.ts';
import { eventually } from '../helpers/eventually.ts';

const fake = await startFakeOpenAi();
t.teardown(() => fake.close());

const INPUT_PER_1K = 250;
const OUTPUT_PER_1K = 500;
const TERMS = { inputMicroPer1k: INPUT_PER_1K * 1_000_000, outputMicroPer1k: OUTPUT_PER_1K * 1_000_000 };

const catalogFile = writeTestCatalog(t, [
  {
    id: 'acme/writer',
    mode: 'text_to_text',
    price: { per: 'tokens', inputPer1k: INPUT_PER_1K, outputPer1k: OUTPUT_PER_1K },
    parameters: { prompt: { required: true }, systemPrompt: {}, temperature: {}, maxTokens: { maximum: 512, default: 256 } },
    deployments: [{ id: 'writer-openai', provider: 'openai', target: { model: 'gpt-4o-mini' } }],
  },
]);

const server = await startTestServer(t, {
  env: { CATALOG_FILE: catalogFile, OPENAI_BASE_URL: fake.url, OPENAI_API_KEY: fake.apiKey, OPENAI_TIMEOUT_MS: '10000', ALLOW_PRIVATE_EGRESS: 'true' },
});

const TERMINAL = ['succeeded', 'failed', 'cancelled', 'expired'];

async function workspace(options: { includeUsage?: boolean; apiKey?: string } = {}) {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId);
  // What the SDK sent the door, read on the way (the request goes on as it was).
  const sdkRequests: Array<Record<string, unknown>> = [];
  // What an application writes to put the service in front of its calls: the base URL and our key.
  const provider = createOpenAICompatible({
    name: 'generation-service',
    baseURL: `${server.url}/openai/v1`,
    apiKey: options.apiKey ?? key,
    includeUsage: options.includeUsage ?? true,
    fetch: (input, init) => {
      if (typeof init?.body === 'string') sdkRequests.push(JSON.parse(init.body));
      return fetch(input, init);
    },
  });
  const generation = async (id: string) => (await server.json(`/v1/generations/${id}?workspaceId=${user.workspaceId}`, { headers: withKey(key) })).body;
  // Unbounded before: the bound is the file's (tap's timeout, 180 s).
  const settled = (id: string) =>
    eventually(
      async () => {
        const g = await generation(id);
        return TERMINAL.includes(g.status) && g;
      },
      { timeoutMs: 180_000, everyMs: 25, what: `${id} ending` },
    );
  const count = async () =>
    (await server.json(`/v1/generations?workspaceId=${user.workspaceId}&limit=100`, { headers: withKey(key) })).body.data.length as number;
  return { user, key, sdkRequests, model: provider.chatModel('acme/writer'), generation, settled, count, query: serverQuery(server) };
}

/** A gate the fake waits on before sending the stream's event `at`. */
function gateAt(at: number) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { pace: (index: number) => (index === at ? opened : undefined), open };
}

/** The usage the fake reported for the last chat answer it made. */
const lastReported = () => [...fake.usage.values()].at(-1)!;
const lastChatRequest = () => fake.received.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!;

t.test('streamText: text arrives while the provider still holds the rest; the usage is the provider usage, charged exactly', async (t) => {
  const ws = await workspace();
  const gate = gateAt(4);
  fake.next('/chat/completions', { kind: 'stream-paced', pace: gate.pace });
  const errors: unknown[] = [];
  const result = streamText({
    model: ws.model,
    system: 'You are terse.',
    messages: [
      { role: 'user', content: 'Say something about lighthouses.' },
      { role: 'assistant', content: 'They guide ships.' },
      { role: 'user', content: 'More about their keepers.' },
    ],
    temperature: 0.5,
    maxOutputTokens: 200,
    maxRetries: 0,
    onError: ({ error }) => {
      errors.push(error);
    },
  });
  const deltas: string[] = [];
  for await (const delta of result.textStream) {
    deltas.push(delta);
    // The provider is held before its fifth event: this piece came through as it was sent.
    if (deltas.length === 1) gate.open();
  }
  t.same(errors, [], 'no error reached the SDK');
  t.same(ws.sdkRequests.at(-1)?.stream_options, { include_usage: true }, 'the SDK asked for the usage chunk');
  t.ok(deltas.length > 1, `the text came in ${deltas.length} pieces`);
  const text = deltas.join('');
  t.equal(await result.text, text);
  t.equal(await result.finishReason, 'stop');

  const sent = lastChatRequest();
  t.equal(sent.body?.stream, true, 'the upstream call was streamed');
  t.same(
    (sent.body as { messages: Array<{ role: string }> }).messages.map((m) => m.role),
    ['system', 'user', 'assistant', 'user'],
    'the SDK conversation reached the provider as it is',
  );

  const response = await result.response;
  t.match(response.id, /^chatcmpl-gen_/, "the answer's id names its generation");
  const id = response.id.slice('chatcmpl-'.length);
  t.equal(response.modelId, 'acme/writer');

  const g = await ws.settled(id);
  t.equal(g.status, 'succeeded');
  t.equal(g.textOutput, text, 'the streamed text joined is the job answer');
  t.equal(g.params.maxTokens, 200, "the SDK's maxOutputTokens is the job's bound");
  const reported = lastReported();
  const usage = await result.usage;
  t.same(
    { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, totalTokens: usage.totalTokens },
    {
      inputTokens: reported.prompt_tokens,
      outputTokens: reported.completion_tokens,
      totalTokens: reported.prompt_tokens + reported.completion_tokens,
    },
    'the usage the SDK read from the usage chunk is the provider usage',
  );
  t.same(g.usage, { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens });
  const charge = tokenCharge(TERMS, { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens }, 1_000_000, 0n);
  t.ok(charge.credits > 0, 'a charge to check');
  t.equal(g.credits, charge.credits, 'charged the provider usage at the catalog price');
  const money = await moneyOf(ws.query, ws.user.workspaceId);
  t.equal(STARTING_CREDITS - money.available, g.credits, 'the balance moved by the charge');
  t.equal(money.available, money.ledgerAvailable, 'balance equals ledger');
  t.same(money.reservations, [], 'no reservation left open');
});

t.test('streamText without includeUsage: the text streams, and the SDK gets no usage (the door sends none unasked)', async (t) => {
  const ws = await workspace({ includeUsage: false });
  const result = streamText({ model: ws.model, prompt: 'Name a harbour.', maxRetries: 0 });
  let text = '';
  for await (const delta of result.textStream) text += delta;
  t.equal(ws.sdkRequests.at(-1)?.stream, true);
  t.equal(ws.sdkRequests.at(-1)?.stream_options, undefined, 'the SDK asked for no usage');
  const usage = await result.usage;
  t.equal(usage.inputTokens, undefined, 'no usage chunk');
  const id = (await result.response).id.slice('chatcmpl-'.length);
  const g = await ws.settled(id);
  t.equal(g.status, 'succeeded');
  t.equal(g.textOutput, text);
  // The service still asks its provider for the usage, and charges it.
  const reported = lastReported();
  t.same(g.usage, { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens }, 'the job is charged by the provider usage all the same');
  const money = await moneyOf(ws.query, ws.user.workspaceId);
  t.equal(money.available, money.ledgerAvailable, 'balance equals ledger');
});

t.test('generateText: the whole answer, its usage, one generation of the key workspace', async (t) => {
  const ws = await workspace();
  const result = await generateText({ model: ws.model, prompt: 'Describe a tide pool.', maxOutputTokens: 100, maxRetries: 0 });
  t.ok(result.text.length > 0, 'an answer');
  t.equal(result.finishReason, 'stop');
  const id = result.response.id.slice('chatcmpl-'.length);
  t.equal(result.response.headers?.['x-generation-id'], id);
  const g = await ws.generation(id);
  t.equal(g.status, 'succeeded', 'ended before the answer came');
  t.equal(g.textOutput, result.text);
  t.equal(g.workspaceId, ws.user.workspaceId);
  t.equal(g.mode, 'text_to_text');
  const reported = lastReported();
  t.same(
    { inputTokens: result.usage.inputTokens, outputTokens: result.usage.outputTokens, totalTokens: result.usage.totalTokens },
    {
      inputTokens: reported.prompt_tokens,
      outputTokens: reported.completion_tokens,
      totalTokens: reported.prompt_tokens + reported.completion_tokens,
    },
  );
  t.equal(g.credits, tokenCharge(TERMS, { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens }, 1_000_000, 0n).credits);
  t.equal(await ws.count(), 1, 'one generation');
  const money = await moneyOf(ws.query, ws.user.workspaceId);
  t.equal(money.available, money.ledgerAvailable, 'balance equals ledger');
  t.same(money.reservations, []);
});

t.test('an SDK abort mid-stream: the job is drained to its end and charged the provider usage', async (t) => {
  const ws = await workspace();
  const gate = gateAt(3);
  fake.next('/chat/completions', { kind: 'stream-paced', pace: gate.pace });
  const controller = new AbortController();
  const result = streamText({
    model: ws.model,
    prompt: 'Tell me about harbours.',
    abortSignal: controller.signal,
    maxRetries: 0,
    onError: () => {},
  });
  let received = '';
  try {
    for await (const delta of result.textStream) {
      received += delta;
      if (received !== '') controller.abort();
    }
  } catch {
    // The abort.
  }
  t.ok(received.length > 0, 'a piece arrived before the abort');
  const requestId = String(lastChatRequest().headers['x-client-request-id']);
  gate.open();
  t.equal(await fake.streamEnded(requestId), 'done', 'the upstream stream was read to its end');
  const [row] = await ws.query<{ id: string }>('select id from generations where workspace_id = ?', [ws.user.workspaceId]);
  const g = await ws.settled(row!.id);
  t.equal(g.status, 'succeeded', 'the job went on to its end');
  t.ok(g.textOutput.startsWith(received), 'what streamed is the start of the answer');
  const reported = fake.usage.get(requestId)!;
  t.same(g.usage, { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens }, 'the provider usage');
  t.equal(g.credits, tokenCharge(TERMS, { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens }, 1_000_000, 0n).credits);
  const money = await moneyOf(ws.query, ws.user.workspaceId);
  t.equal(money.available, money.ledgerAvailable, 'balance equals ledger');
  t.same(money.reservations, []);
});

t.test("the door's errors reach the SDK as APICallErrors with OpenAI's status and message", async (t) => {
  const ws = await workspace();
  const unknown = await generateText({ model: createOpenAICompatibleModel(ws.key, 'nope/nothing'), prompt: 'hi', maxRetries: 0 }).catch((e: unknown) => e);
  t.ok(APICallError.isInstance(unknown), 'an APICallError');
  const notFound = unknown as APICallError;
  t.equal(notFound.statusCode, 404);
  t.match(notFound.message, /nope\/nothing/, "the door's message, parsed from OpenAI's error shape");
  t.equal(notFound.isRetryable, false);

  const badKey = await workspace({ apiKey: `gs_live_${'x'.repeat(64)}` });
  const unauthorized = await generateText({ model: badKey.model, prompt: 'hi', maxRetries: 0 }).catch((e: unknown) => e);
  t.ok(APICallError.isInstance(unauthorized));
  t.equal((unauthorized as APICallError).statusCode, 401);

  // Streamed: the failure before the first piece is an ordinary HTTP error, raised through the stream's error part.
  const errors: unknown[] = [];
  const streamed = streamText({
    model: ws.model,
    prompt: 'hi',
    temperature: 3,
    maxRetries: 0,
    onError: ({ error }) => {
      errors.push(error);
    },
  });
  const parts: string[] = [];
  for await (const part of streamed.fullStream) parts.push(part.type);
  t.ok(parts.includes('error'), `an error part (${parts.join(', ')})`);
  t.equal(errors.length, 1);
  t.ok(APICallError.isInstance(errors[0]));
  t.equal((errors[0] as APICallError).statusCode, 400, 'temperature out of range');
  t.match((errors[0] as APICallError).responseBody ?? '', /"param":"temperature"/, 'naming its param');
  t.equal(await ws.count(), 0, 'no generation made by a refused request');
  const [ledger] = await ws.query<{ n: string }>('select count(*)::int8 as n from credit_ledger where workspace_id = ? and generation_id is not null', [
    ws.user.workspaceId,
  ]);
  t.equal(Number(ledger!.n), 0, 'nothing reserved or charged');
});

function createOpenAICompatibleModel(apiKey: string, modelId: string) {
  return createOpenAICompatible({ name: 'generation-service', baseURL: `${server.url}/openai/v1`, apiKey, includeUsage: true }).chatModel(modelId);
}

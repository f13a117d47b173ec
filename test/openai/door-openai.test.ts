/**
 * The OpenAI-compatible door in front of an OpenAI deployment (the strict fake, test/fakes/openai.ts), with
 * the official client: tokens stream through as the provider sends them, a token-priced job is charged its
 * provider's usage exactly, and a client that leaves mid-stream is drained to the usage or, past the node's
 * drain bound, cancelled and charged for the tokens it streamed. Balance equals ledger throughout.
 */
import t from 'tap';
import OpenAI from 'openai';
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

async function serverWith(env: Record<string, string> = {}) {
  return startTestServer(t, {
    env: {
      CATALOG_FILE: catalogFile,
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: fake.apiKey,
      OPENAI_TIMEOUT_MS: '10000',
      ALLOW_PRIVATE_EGRESS: 'true',
      ...env,
    },
  });
}

const server = await serverWith();
const drainless = await serverWith({ OPENAI_DRAINS_PER_NODE: '0' });

async function workspaceOn(on: typeof server) {
  const user = await signUp(on);
  const { key } = await createKey(on, user.cookie, user.workspaceId);
  const openai = new OpenAI({ baseURL: `${on.url}/openai/v1`, apiKey: key, maxRetries: 0 });
  const generation = async (id: string) => (await on.json(`/v1/generations/${id}?workspaceId=${user.workspaceId}`, { headers: withKey(key) })).body;
  // Unbounded before: the bound is the file's (tap's timeout, 180 s).
  const settled = (id: string) =>
    eventually(
      async () => {
        const g = await generation(id);
        return ['succeeded', 'failed', 'cancelled', 'expired'].includes(g.status) && g;
      },
      { timeoutMs: 180_000, everyMs: 25, what: `${id} ending` },
    );
  return { user, key, openai, generation, settled, query: serverQuery(on) };
}

/** A gate the fake waits on before sending the stream's chunk `at`. */
function gateAt(at: number) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { pace: (index: number) => (index === at ? opened : undefined), open };
}

t.test('a streamed chat: pieces reach the client before the provider sent its last; the usage chunk is the provider usage, charged exactly', async (t) => {
  const ws = await workspaceOn(server);
  const gate = gateAt(4);
  fake.next('/chat/completions', { kind: 'stream-paced', pace: gate.pace });
  const stream = await ws.openai.chat.completions.create({
    model: 'acme/writer',
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Say something about lighthouses.' },
      { role: 'assistant', content: 'They guide ships.' },
      { role: 'user', content: 'More.' },
    ],
    temperature: 0.5,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  let sawContentBeforeGate = false;
  for await (const chunk of stream) {
    chunks.push(chunk);
    if (!sawContentBeforeGate && chunk.choices[0]?.delta.content) {
      // The provider is held before its fifth chunk: what arrived came through as it was sent.
      sawContentBeforeGate = true;
      gate.open();
    }
  }
  t.ok(sawContentBeforeGate, 'a piece arrived while the provider was still holding the rest');
  const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
  const usageChunk = chunks[chunks.length - 1]!;
  t.same(usageChunk.choices, []);
  t.ok(usageChunk.usage, 'the usage chunk');
  const id = chunks[0]!.id.slice('chatcmpl-'.length);
  const g = await ws.settled(id);
  t.equal(g.status, 'succeeded');
  t.equal(g.textOutput, text, 'the pieces joined are the job answer');
  // The provider's own count, as the fake reported it for this request.
  const sent = fake.received.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!;
  t.same(
    (sent.body as { messages: unknown[] }).messages.map((m) => (m as { role: string }).role),
    ['system', 'user', 'assistant', 'user'],
    'the conversation went as it is',
  );
  const reported = [...fake.usage.values()].at(-1)!;
  t.same(usageChunk.usage, {
    prompt_tokens: reported.prompt_tokens,
    completion_tokens: reported.completion_tokens,
    total_tokens: reported.prompt_tokens + reported.completion_tokens,
  });
  const charge = tokenCharge(TERMS, { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens }, 1_000_000, 0n);
  t.equal(g.credits, charge.credits, 'charged the provider usage at the catalog price');
  const after = await moneyOf(ws.query, ws.user.workspaceId);
  t.equal(STARTING_CREDITS - after.available, g.credits, 'the balance moved by the charge');
  t.equal(after.available, after.ledgerAvailable, 'balance equals ledger');
  t.same(after.reservations, [], 'no reservation left open');
});

t.test('a client that leaves mid-stream: the job is drained to its end and charged the provider usage', async (t) => {
  const ws = await workspaceOn(server);
  const gate = gateAt(3);
  fake.next('/chat/completions', { kind: 'stream-paced', pace: gate.pace });
  const controller = new AbortController();
  const stream = await ws.openai.chat.completions.create(
    { model: 'acme/writer', messages: [{ role: 'user', content: 'Tell me about harbours.' }], stream: true },
    { signal: controller.signal },
  );
  let id = '';
  try {
    for await (const chunk of stream) {
      id = chunk.id.slice('chatcmpl-'.length);
      if (chunk.choices[0]?.delta.content) controller.abort();
    }
  } catch {
    // The abort.
  }
  gate.open();
  const g = await ws.settled(id);
  t.equal(g.status, 'succeeded', 'the job went on to its end');
  const reported = [...fake.usage.values()].at(-1)!;
  t.same(g.usage, { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens });
  const money = await moneyOf(ws.query, ws.user.workspaceId);
  t.equal(money.available, money.ledgerAvailable, 'balance equals ledger');
  t.same(money.reservations, []);
});

t.test('past the drain bound, a client that leaves cancels its job, charged for the tokens it streamed', async (t) => {
  const ws = await workspaceOn(drainless);
  const gate = gateAt(3);
  fake.next('/chat/completions', { kind: 'stream-paced', pace: gate.pace });
  const controller = new AbortController();
  const stream = await ws.openai.chat.completions.create(
    { model: 'acme/writer', messages: [{ role: 'user', content: 'Tell me about harbours.' }], stream: true },
    { signal: controller.signal },
  );
  let id = '';
  let received = '';
  try {
    for await (const chunk of stream) {
      id = chunk.id.slice('chatcmpl-'.length);
      received += chunk.choices[0]?.delta.content ?? '';
      if (received !== '') controller.abort();
    }
  } catch {
    // The abort.
  }
  const g = await ws.settled(id);
  gate.open();
  t.equal(g.status, 'cancelled');
  t.ok(g.textOutput.startsWith(received), 'what streamed is recorded');
  t.ok(g.usage && g.usage.inputTokens > 0 && g.usage.outputTokens > 0, `tokens counted: ${JSON.stringify(g.usage)}`);
  t.ok(g.credits > 0, `charged for what streamed (${g.credits} credits)`);
  const money = await moneyOf(ws.query, ws.user.workspaceId);
  t.equal(money.available, money.ledgerAvailable, 'balance equals ledger');
  t.same(money.reservations, []);
  const ended = await fake.streamEnded([...fake.streams.keys()].at(-1)!);
  t.ok(ended, 'the upstream stream ended (closed by the service)');
});

import t, { type Test } from 'tap';
import OpenAI, { APIError } from 'openai';
import { PROVIDER_ERROR_CODES, ProviderFailure, type AdapterUpdate } from '../../providers/adapter.ts';
import { createOpenAiAdapter } from '../../providers/openai/adapter.ts';
import type { OpenAiDeploymentTarget } from '../../providers/openai/deployment.ts';
import { jobFor, recorder, startFakeOpenAi, testContext, type FakeOpenAi, type StreamRecord } from '../fakes/openai.ts';

/**
 * Chat completions streamed: the fake's events as OpenAI sends them (read raw, and through the official
 * client), and the adapter reporting each piece as it arrives, its end, its failures mid-stream, its cancel
 * and its bounds.
 */
let fake: FakeOpenAi;
t.before(async () => {
  fake = await startFakeOpenAi();
});
t.teardown(() => fake.close());

const client = () => new OpenAI({ apiKey: fake.apiKey, baseURL: fake.url, maxRetries: 0, logLevel: 'off' });

function adapterFor(target: OpenAiDeploymentTarget = { model: 'gpt-4o-mini' }, context = testContext()) {
  return createOpenAiAdapter({ apiKey: fake.apiKey, baseUrl: fake.url }, { id: 'openai-stream-test', target }, context);
}

/** POSTs `body` to the fake's chat completions as it is; the raw answer. */
async function post(body: Record<string, unknown>, requestId = `raw_${Math.random().toString(36).slice(2)}`) {
  const res = await fetch(`${fake.url}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${fake.apiKey}`, 'content-type': 'application/json', 'x-client-request-id': requestId },
    body: JSON.stringify(body),
  });
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text: await res.text(), requestId };
}

/** The data of each server-sent event of a body made of `data: …` lines, each followed by a blank line. */
function eventsOf(t: Test, text: string): string[] {
  t.match(text, /^(data: [^\n]+\n\n)+$/, 'only data lines, each followed by a blank line');
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((block) => block.slice('data: '.length));
}

type Chunk = { id: string; object: string; created: number; model: string; choices: unknown[]; usage?: unknown } & Record<string, unknown>;

const outputs = (updates: AdapterUpdate[]) => updates.flatMap((u) => (u.type === 'output' ? [u.delta] : []));
const typesOf = (updates: AdapterUpdate[]) => updates.map((u) => u.type);
const failed = (update: AdapterUpdate) => {
  if (update.type !== 'failed') throw new Error(`expected failed, got ${JSON.stringify(update).slice(0, 300)}`);
  return update;
};
const succeeded = (update: AdapterUpdate) => {
  if (update.type !== 'succeeded') throw new Error(`expected succeeded, got ${JSON.stringify(update).slice(0, 300)}`);
  return update;
};
/** `promise`, or after `ms` anyway: a gate that a broken adapter never opens must not hang the test. */
const atMost = (promise: Promise<unknown>, ms = 3_000) => Promise.race([promise, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
/** A promise and its resolve. */
function signal() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
/** Lets pending timers and I/O run, so that an update that should not come would have come. */
const settle = (ms = 100) => new Promise((resolve) => setTimeout(resolve, ms));

t.test('the fake streams as OpenAI does: chunks of chat.completion.chunk, usage null in each, the usage chunk with no choices, [DONE]', async (t) => {
  const { status, contentType, text, requestId } = await post({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'Say hi' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  t.equal(status, 200);
  t.match(contentType, /^text\/event-stream/);
  const events = eventsOf(t, text);
  t.equal(events.at(-1), '[DONE]', 'the last event is [DONE]');
  const chunks = events.slice(0, -1).map((data) => JSON.parse(data) as Chunk);
  const [first] = chunks;
  for (const chunk of chunks) {
    t.same(Object.keys(chunk).sort(), ['choices', 'created', 'id', 'model', 'object', 'service_tier', 'system_fingerprint', 'usage'], 'the fields of a chunk');
    t.same(
      [chunk.object, chunk.id, chunk.created, chunk.model, chunk.system_fingerprint],
      ['chat.completion.chunk', first!.id, first!.created, first!.model, first!.system_fingerprint],
      'the same id, created, model in each',
    );
  }
  t.match(first!.id, /^chatcmpl-/);
  t.same(first!.choices, [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }], 'the role first, with empty content');
  const pieces = chunks.slice(1, -2);
  t.same(
    pieces.map((c) => c.choices),
    ['echo', ':', ' Say', ' hi'].map((content) => [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }]),
    'a delta per piece',
  );
  t.same(chunks.at(-2)!.choices, [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }], 'an empty delta with the finish_reason');
  t.ok(
    chunks.slice(0, -1).every((c) => c.usage === null),
    'every chunk before the last has usage: null',
  );
  const last = chunks.at(-1)!;
  t.same(last.choices, [], 'the usage chunk has no choices');
  const counted = fake.usage.get(requestId)!;
  t.match(last.usage, {
    prompt_tokens: counted.prompt_tokens,
    completion_tokens: counted.completion_tokens,
    total_tokens: counted.prompt_tokens + counted.completion_tokens,
  });
  t.equal(fake.streams.get(requestId)?.ended, 'done');

  const plain = await post({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hi' }], stream: true, max_tokens: 1 });
  const plainEvents = eventsOf(t, plain.text);
  t.equal(plainEvents.at(-1), '[DONE]');
  const plainChunks = plainEvents.slice(0, -1).map((data) => JSON.parse(data) as Chunk);
  t.ok(
    plainChunks.every((c) => !('usage' in c)),
    'without include_usage: no usage field',
  );
  t.same(plainChunks.at(-1)!.choices, [{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }], 'no usage chunk; cut at max_tokens');
  t.same(
    plainChunks.slice(1, -1).map((c) => (c.choices[0] as { delta: { content: string } }).delta.content),
    ['echo'],
  );
  t.equal(fake.usage.get(plain.requestId), undefined, 'no usage reported');

  const whole = await post({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hi' }], stream: false });
  t.match(whole.contentType, /^application\/json/);
  t.match(
    JSON.parse(whole.text),
    { object: 'chat.completion', choices: [{ message: { content: 'echo: Say hi' }, finish_reason: 'stop' }] },
    'stream: false answers whole',
  );
});

t.test('stream_options without stream is refused as OpenAI refuses it; so are malformed stream fields', async (t) => {
  for (const stream of [undefined, false]) {
    const { status, text } = await post({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      ...(stream === undefined ? {} : { stream }),
      stream_options: { include_usage: true },
    });
    t.equal(status, 400);
    t.same(JSON.parse(text), {
      error: {
        message: "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        type: 'invalid_request_error',
        param: 'stream_options',
        code: null,
      },
    });
  }
  const error = await client()
    .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream_options: { include_usage: true } })
    .catch((e: unknown) => e);
  t.match(error, { status: 400, param: 'stream_options', message: /only allowed when 'stream' is enabled/ }, 'through the official client');
  const unknown = await post({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_tokens: true } });
  t.match(JSON.parse(unknown.text), { error: { param: 'stream_options.include_tokens', code: 'unknown_parameter' } });
  const notBoolean = await post({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: 'yes' });
  t.match(JSON.parse(notBoolean.text), { error: { param: 'stream', code: 'invalid_type' } });
});

t.test('the fake takes the chat fields OpenAI documents and refuses what OpenAI refuses', async (t) => {
  const api = client();
  const conversation = [
    { role: 'developer' as const, content: 'Answer in json.' },
    { role: 'system' as const, content: 'Be brief.', name: 'rules' },
    { role: 'user' as const, content: 'Weather in Paris?', name: 'ana' },
    {
      role: 'assistant' as const,
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
    },
    { role: 'tool' as const, content: '{"celsius":21}', tool_call_id: 'call_1' },
    { role: 'user' as const, content: 'And so? STOP here' },
  ];
  const tools = [{ type: 'function' as const, function: { name: 'weather', description: 'The weather', parameters: { type: 'object', properties: {} } } }];
  const answer = await api.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: conversation,
    temperature: 0.5,
    top_p: 0.9,
    n: 2,
    stop: [' STOP'],
    user: 'user-1',
    seed: 3,
    max_completion_tokens: 100,
    response_format: { type: 'json_object' },
    tools,
    tool_choice: 'auto',
    parallel_tool_calls: false,
    store: false,
    metadata: { job: 'x' },
  });
  t.equal(answer.choices.length, 2, 'n choices');
  t.same(
    answer.choices.map((c) => [c.index, c.message.content, c.finish_reason]),
    [
      [0, 'echo: And so?', 'stop'],
      [1, 'echo: And so?', 'stop'],
    ],
    'cut before the stop sequence',
  );
  const streamed = await api.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: conversation,
    tools,
    tool_choice: { type: 'function', function: { name: 'weather' } },
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  for await (const chunk of streamed) text += chunk.choices[0]?.delta.content ?? '';
  t.equal(text, 'echo: And so? STOP here');

  const refusals: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    ['an unknown field', { temperature: 1, flavour: 'x' }, { param: 'flavour', code: 'unknown_parameter' }],
    [
      'a tool message with no tool call before it',
      {
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'tool', content: 'x', tool_call_id: 'call_9' },
        ],
      },
      { param: 'messages.[1].role', message: /must be a response to a preceeding message with 'tool_calls'/ },
    ],
    [
      'a tool call left unanswered',
      { messages: [conversation[3], { role: 'user', content: 'hi' }] },
      { param: 'messages.[0].role', message: /The following tool_call_ids did not have response messages: call_1/ },
    ],
    [
      'a tool message without its id',
      { messages: [{ role: 'tool', content: 'x' }] },
      { param: 'messages[0].tool_call_id', code: 'missing_required_parameter' },
    ],
    ['tool_choice without tools', { tool_choice: 'auto' }, { param: 'tool_choice', message: /only allowed when 'tools' are specified/ }],
    ['a tool of no known type', { tools: [{ type: 'plugin' }] }, { param: 'tools[0].type' }],
    ['JSON mode without the word json', { response_format: { type: 'json_object' } }, { param: 'messages', message: /must contain the word 'json'/ }],
    ['a response_format of no known type', { response_format: { type: 'yaml' } }, { param: 'response_format.type' }],
    ['five stop sequences', { stop: ['a', 'b', 'c', 'd', 'e'] }, { param: 'stop', code: 'array_above_max_length' }],
    ['stop on o4-mini', { model: 'o4-mini', stop: 'x' }, { param: 'stop', code: 'unsupported_parameter' }],
    ['top_p over 1', { top_p: 2 }, { param: 'top_p', code: 'decimal_above_max_value' }],
    ['an unknown field in a message', { messages: [{ role: 'user', content: 'hi', mood: 'x' }] }, { param: 'messages[0].mood', code: 'unknown_parameter' }],
    ['a user message without content', { messages: [{ role: 'user' }] }, { param: 'messages[0].content', code: 'missing_required_parameter' }],
  ];
  for (const [what, fields, expected] of refusals) {
    const error = await api.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], ...fields } as never).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.match(error, { status: 400, ...expected }, what);
  }
});

t.test('the official client reads the fake’s streams: pieces, usage, an error event, a cut connection', async (t) => {
  const api = client();
  const request = {
    model: 'gpt-4o-mini',
    messages: [{ role: 'user' as const, content: 'Say hi' }],
    stream: true as const,
    stream_options: { include_usage: true },
  };
  const chunks = [];
  for await (const chunk of await api.chat.completions.create(request)) chunks.push(chunk);
  t.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'echo: Say hi');
  t.same(chunks.at(-1)!.choices, []);
  t.ok(chunks.at(-1)!.usage && chunks.at(-1)!.usage!.completion_tokens > 0, 'the usage chunk last');

  const final = await api.chat.completions.stream(request).finalChatCompletion();
  t.equal(final.choices[0]!.message.content, 'echo: Say hi', "the client's stream helper assembles the chunks");
  t.equal(final.choices[0]!.finish_reason, 'stop');

  fake.next('/chat/completions', { kind: 'stream-error', afterChunks: 2 });
  const seen: string[] = [];
  const error = await (async () => {
    for await (const chunk of await api.chat.completions.create(request)) seen.push(chunk.choices[0]?.delta.content ?? '');
  })().catch((e: unknown) => e);
  t.same(seen, ['', 'echo'], 'the chunks before the error');
  t.ok(error instanceof APIError, 'an error event throws APIError');
  t.match(error, { status: undefined, type: 'server_error', message: /The server experienced an error while processing your request/ });

  fake.next('/chat/completions', { kind: 'stream-cut', afterChunks: 2 });
  const cut = await (async () => {
    for await (const _ of await api.chat.completions.create(request));
  })().catch((e: unknown) => e);
  t.ok(cut instanceof Error, `a cut connection throws (${String(cut)})`);
});

t.test('the adapter reports each piece as it arrives, before the stream ends; textOutput is their concatenation, usage the usage chunk', async (t) => {
  const adapter = adapterFor();
  const rec = recorder();
  const firstPiece = signal();
  let providerJobId = '';
  let atFirstPiece: StreamRecord | undefined;
  // The fake holds the stream after its first piece until the adapter has reported that piece.
  fake.next('/chat/completions', { kind: 'stream-paced', pace: (index) => (index === 2 ? atMost(firstPiece.promise) : undefined) as Promise<void> });
  const report = (update: AdapterUpdate) => {
    if (update.type === 'output' && !atFirstPiece) {
      atFirstPiece = { ...fake.streams.get(providerJobId)! };
      firstPiece.resolve();
    }
    rec.report(update);
  };
  ({ providerJobId } = await adapter.submit(jobFor('text_to_text', { prompt: 'Say hi' }), report));
  const end = succeeded(await rec.ended);
  t.same(atFirstPiece, { events: 2, bytes: atFirstPiece?.bytes, ended: undefined }, 'the first piece was reported while the fake had sent two events of eight');
  t.same(typesOf(rec.updates), ['running', 'output', 'output', 'output', 'output', 'succeeded']);
  t.same(outputs(rec.updates), ['echo', ':', ' Say', ' hi']);
  t.equal(end.textOutput, outputs(rec.updates).join(''), 'textOutput is the pieces joined');
  t.equal(end.textOutput, 'echo: Say hi');
  const counted = fake.usage.get(providerJobId)!;
  t.same(end.usage, { inputTokens: counted.prompt_tokens, outputTokens: counted.completion_tokens }, 'usage from the usage chunk');
  t.match(fake.received.at(-1)!.body, { stream: true, stream_options: { include_usage: true } });
  t.equal(fake.streams.get(providerJobId)?.ended, 'done');
  await adapter.close();
});

t.test("an error event mid-stream: failed with OpenAI's message, after the pieces that came", async (t) => {
  const adapter = adapterFor();
  fake.next('/chat/completions', { kind: 'stream-error', afterChunks: 3 });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text', { prompt: 'Say hi' }), rec.report);
  const end = failed(await rec.ended);
  t.same(typesOf(rec.updates), ['running', 'output', 'output', 'failed'], 'the pieces, then failed');
  t.same(outputs(rec.updates), ['echo', ':']);
  t.equal(end.errorCode, PROVIDER_ERROR_CODES.error);
  t.equal(
    end.errorMessage,
    'OpenAI reported an error mid-answer (server_error): The server experienced an error while processing your request. We apologize for the inconvenience!',
  );
  t.equal(end.usage, undefined, 'no usage had come');
  t.equal(await atMost(fake.streamEnded(providerJobId)), 'error');

  fake.next('/chat/completions', {
    kind: 'stream-error',
    afterChunks: 2,
    error: { message: 'Rate limit reached for gpt-4o-mini on tokens per min (TPM).', type: 'tokens', param: null, code: 'rate_limit_exceeded' },
  });
  const limited = recorder();
  await adapter.submit(jobFor('text_to_text'), limited.report);
  t.match(failed(await limited.ended), { errorCode: PROVIDER_ERROR_CODES.rateLimited, errorMessage: /\(rate_limit_exceeded\): Rate limit reached/ });
  await adapter.close();
});

t.test('a connection cut mid-stream: provider_unavailable after the pieces; cut after the usage chunk: with the usage', async (t) => {
  const adapter = adapterFor();
  // The connection breaks once the adapter has reported the first piece (a client reads what came before a break).
  const firstPiece = signal();
  fake.next('/chat/completions', {
    kind: 'stream-cut',
    afterChunks: 2,
    pace: (index) => (index === 2 ? atMost(firstPiece.promise) : undefined) as Promise<void>,
  });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text', { prompt: 'Say hi' }), (update) => {
    rec.report(update);
    if (update.type === 'output') firstPiece.resolve();
  });
  const end = failed(await rec.ended);
  t.same(typesOf(rec.updates), ['running', 'output', 'failed']);
  t.same(outputs(rec.updates), ['echo']);
  t.equal(end.errorCode, PROVIDER_ERROR_CODES.unavailable);
  t.match(end.errorMessage, /connection to the provider broke mid-answer/);
  t.equal(end.usage, undefined);
  t.equal(fake.streams.get(providerJobId)?.ended, 'cut');

  // Role, four pieces, the finish and the usage chunk go; the connection breaks before [DONE].
  // A pause before the break, for the client to have read the usage chunk (a break discards what it has not read).
  fake.next('/chat/completions', {
    kind: 'stream-cut',
    afterChunks: 7,
    pace: (index) => (index === 7 ? new Promise<void>((resolve) => setTimeout(resolve, 100)) : undefined),
  });
  const late = recorder();
  const second = await adapter.submit(jobFor('text_to_text', { prompt: 'Say hi' }), late.report);
  const lateEnd = failed(await late.ended);
  t.equal(lateEnd.errorCode, PROVIDER_ERROR_CODES.unavailable);
  const counted = fake.usage.get(second.providerJobId)!;
  t.same(lateEnd.usage, { inputTokens: counted.prompt_tokens, outputTokens: counted.completion_tokens }, 'the usage that had come');
  t.equal(outputs(late.updates).join(''), 'echo: Say hi');
  await adapter.close();
});

t.test('cancel mid-stream aborts the request: the fake sees its connection closed, nothing more is reported', async (t) => {
  const adapter = adapterFor();
  const held = signal();
  fake.next('/chat/completions', { kind: 'stream-paced', pace: (index) => (index === 2 ? held.promise : undefined) });
  const firstPiece = signal();
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text', { prompt: 'Say hi' }), (update) => {
    rec.report(update);
    if (update.type === 'output') firstPiece.resolve();
  });
  await atMost(firstPiece.promise);
  await adapter.cancel(providerJobId);
  t.equal(await atMost(fake.streamEnded(providerJobId)), 'closed-by-client', 'the upstream connection was closed');
  held.resolve();
  await settle();
  t.same(typesOf(rec.updates), ['running', 'output'], 'no failed or succeeded after the cancel');
  t.equal(fake.streams.get(providerJobId)?.events, 2, 'nothing more was sent');
  await adapter.close();
});

t.test('resume of a job streaming in this process: the next pieces and the end go to the new follower', async (t) => {
  const adapter = adapterFor();
  const held = signal();
  fake.next('/chat/completions', { kind: 'stream-paced', pace: (index) => (index === 2 ? held.promise : undefined) });
  const firstPiece = signal();
  const first = recorder();
  const job = jobFor('text_to_text', { prompt: 'Say hi' });
  const { providerJobId } = await adapter.submit(job, (update) => {
    first.report(update);
    if (update.type === 'output') firstPiece.resolve();
  });
  await atMost(firstPiece.promise);
  const second = recorder();
  adapter.resume(providerJobId, job, second.report);
  held.resolve();
  t.equal(succeeded(await second.ended).textOutput, 'echo: Say hi');
  t.same(outputs(first.updates), ['echo']);
  t.same(outputs(second.updates), [':', ' Say', ' hi']);
  await adapter.close();
});

t.test('time bounds: no piece for the request timeout, or the deadline passed mid-stream: provider_timeout', async (t) => {
  const idle = adapterFor({ model: 'gpt-4o-mini' }, testContext({ requestTimeoutMs: 300 }));
  const held = signal();
  fake.next('/chat/completions', { kind: 'stream-paced', pace: (index) => (index === 2 ? held.promise : undefined) });
  const rec = recorder();
  const { providerJobId } = await idle.submit(jobFor('text_to_text', { prompt: 'Say hi' }), rec.report);
  const end = failed(await rec.ended);
  t.equal(end.errorCode, PROVIDER_ERROR_CODES.timeout);
  t.match(end.errorMessage, /sent nothing for 300 ms/);
  t.same(typesOf(rec.updates), ['running', 'output', 'failed']);
  t.equal(await atMost(fake.streamEnded(providerJobId)), 'closed-by-client');
  held.resolve();
  await idle.close();

  const steady = adapterFor();
  fake.next('/chat/completions', { kind: 'stream-long', pieces: 10_000, pace: 20 });
  const slow = recorder();
  const second = await steady.submit(jobFor('text_to_text', {}, {}, 500), slow.report);
  const late = failed(await slow.ended);
  t.equal(late.errorCode, PROVIDER_ERROR_CODES.timeout);
  t.match(late.errorMessage, /still answering after \d+ ms \(the job's deadline\)/);
  t.ok(outputs(slow.updates).length > 3, 'pieces came steadily until the deadline');
  t.equal(await atMost(fake.streamEnded(second.providerJobId)), 'closed-by-client');
  await steady.close();
});

t.test('a stream larger than maxResponseBytes fails with provider_bad_response without being read to its end', async (t) => {
  const maxResponseBytes = 64 * 1024;
  const adapter = adapterFor({ model: 'gpt-4o-mini' }, testContext({ maxResponseBytes }));
  const pieces = 400_000;
  fake.next('/chat/completions', { kind: 'stream-long', pieces });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text'), rec.report);
  const end = failed(await rec.ended);
  t.equal(end.errorCode, PROVIDER_ERROR_CODES.badResponse);
  t.match(end.errorMessage, /larger than 65536 bytes/);
  const streamed = outputs(rec.updates).join('');
  t.ok(streamed.length > 0 && streamed.length < maxResponseBytes, `pieces were reported as they came (${streamed.length} characters)`);
  t.equal(await atMost(fake.streamEnded(providerJobId)), 'closed-by-client', 'the connection was closed');
  const sent = fake.streams.get(providerJobId)!.bytes;
  const whole = pieces * 200; // each event is over 200 bytes
  t.ok(sent < whole / 10, `the fake sent ${sent} bytes of over ${whole} before the close`);
  await adapter.close();
});

t.test('a deployment with stream: false makes one call answered whole', async (t) => {
  const adapter = adapterFor({ model: 'gpt-4o-mini', stream: false });
  const rec = recorder();
  const { providerJobId } = await adapter.submit(jobFor('text_to_text', { prompt: 'Say hi', maxTokens: 20 }), rec.report);
  const end = succeeded(await rec.ended);
  t.equal(end.textOutput, 'echo: Say hi');
  t.same(typesOf(rec.updates), ['running', 'succeeded'], 'no pieces');
  t.same(fake.received.find((r) => r.headers['x-client-request-id'] === providerJobId)!.body, {
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'Say hi' }],
    max_tokens: 20,
  });
  t.equal(fake.streams.has(providerJobId), false, 'not streamed');
  t.equal(fake.submissions.get(providerJobId), 1);
  const counted = fake.usage.get(providerJobId)!;
  t.same(end.usage, { inputTokens: counted.prompt_tokens, outputTokens: counted.completion_tokens });
  await adapter.close();
});

t.test('messages, topP, stop, user, responseFormat, tools and toolChoice reach OpenAI under its names', async (t) => {
  const adapter = adapterFor();
  const messages = [
    { role: 'developer', content: 'Reply in json.' },
    { role: 'user', content: 'Weather?', name: 'ana' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_7', type: 'function', function: { name: 'weather', arguments: '{}' } }] },
    { role: 'tool', content: '{"celsius":21}', tool_call_id: 'call_7', name: 'dropped' },
    { role: 'user', content: 'So? END of it' },
  ];
  const tools = [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: {} } } }];
  const rec = recorder();
  const { providerJobId } = await adapter.submit(
    jobFor('text_to_text', {
      prompt: 'ignored when messages are given',
      systemPrompt: 'ignored too',
      messages,
      topP: 0.5,
      stop: [' END'],
      user: 'user-42',
      responseFormat: { type: 'json_object' },
      tools,
      toolChoice: 'auto',
      temperature: 0.3,
      maxTokens: 50,
    }),
    rec.report,
  );
  const end = succeeded(await rec.ended);
  t.equal(end.textOutput, 'echo: So?', 'the stop sequence applied');
  t.same(fake.received.find((r) => r.headers['x-client-request-id'] === providerJobId)!.body, {
    model: 'gpt-4o-mini',
    messages: [
      { role: 'developer', content: 'Reply in json.' },
      { role: 'user', content: 'Weather?', name: 'ana' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'call_7', type: 'function', function: { name: 'weather', arguments: '{}' } }] },
      { role: 'tool', content: '{"celsius":21}', tool_call_id: 'call_7' },
      { role: 'user', content: 'So? END of it' },
    ],
    temperature: 0.3,
    top_p: 0.5,
    max_tokens: 50,
    stop: [' END'],
    user: 'user-42',
    response_format: { type: 'json_object' },
    tools,
    tool_choice: 'auto',
    stream: true,
    stream_options: { include_usage: true },
  });

  const before = fake.received.length;
  for (const [params, message] of [
    [{ messages: [] }, /non-empty array/],
    [{ messages: [{ role: 'wizard', content: 'x' }] }, /role wizard/],
    [{ messages: [{ role: 'user', content: 7 }] }, /no text content/],
    [{ messages: [{ role: 'tool', content: 'x' }] }, /no tool_call_id/],
    [{ stop: [1] }, /stop must be a string or an array of strings/],
  ] as const) {
    const error = await adapter
      .submit(jobFor('text_to_text', params), () => undefined)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    t.ok(error instanceof ProviderFailure && error.code === PROVIDER_ERROR_CODES.inputRejected, `refused by submit: ${String(error)}`);
    t.match((error as Error).message, message);
  }
  t.equal(fake.received.length, before, 'nothing sent for them');
  await adapter.close();
});

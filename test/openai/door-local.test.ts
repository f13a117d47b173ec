/**
 * The OpenAI-compatible door (docs/openai-compatible.md) with the official `openai` client, over the shipped
 * catalog's local models: its base URL and one of our API keys are all a client changes.
 */
import t from 'tap';
import OpenAI, { AuthenticationError, BadRequestError, NotFoundError, PermissionDeniedError } from 'openai';
import { sharedTestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';

async function client(scopes: Parameters<typeof createKey>[3] = ['all']) {
  const server = await sharedTestServer();
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, scopes);
  return { server, user, key, openai: new OpenAI({ baseURL: `${server.url}/openai/v1`, apiKey: key, maxRetries: 0 }) };
}

t.test('a chat completion through the official client is a generation of the key workspace', async (t) => {
  const { server, user, key, openai } = await client();
  const answer = await openai.chat.completions.create({
    model: 'local/text-mini',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello.' },
    ],
    max_tokens: 50,
  });
  t.equal(answer.object, 'chat.completion');
  t.equal(answer.model, 'local/text-mini');
  t.equal(answer.choices.length, 1);
  t.equal(answer.choices[0]!.message.role, 'assistant');
  t.ok((answer.choices[0]!.message.content ?? '').length > 0, 'the answer has text');
  t.match(answer.id, /^chatcmpl-gen_/);
  const generationId = answer.id.slice('chatcmpl-'.length);
  const row = await server.json(`/v1/generations/${generationId}?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  t.equal(row.status, 200);
  t.equal(row.body.status, 'succeeded');
  t.equal(row.body.textOutput, answer.choices[0]!.message.content, 'the answer is the generation text');
  t.equal(row.body.modelId, 'local/text-mini');
});

t.test('a streamed chat: chunks in OpenAI shape, the text joined equals the generation, then [DONE]', async (t) => {
  const { server, user, key, openai } = await client();
  const stream = await openai.chat.completions.create({
    model: 'local/text-mini',
    messages: [{ role: 'user', content: 'Tell a short story.' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  t.ok(chunks.length >= 3, 'role, content, finish (and usage) chunks');
  t.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
  t.equal(chunks[0]!.choices[0]!.delta.role, 'assistant');
  const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
  const finish = chunks.find((c) => c.choices[0]?.finish_reason);
  t.equal(finish?.choices[0]?.finish_reason, 'stop');
  const last = chunks[chunks.length - 1]!;
  t.same(last.choices, [], 'the usage chunk has no choices');
  const generationId = chunks[0]!.id.slice('chatcmpl-'.length);
  const row = await server.json(`/v1/generations/${generationId}?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  t.equal(row.body.textOutput, text);
});

t.test('GET /models lists the door models in OpenAI shape; one model by id', async (t) => {
  const { openai } = await client();
  const page = await openai.models.list();
  const ids = page.data.map((m) => m.id);
  t.ok(ids.includes('local/text-mini'));
  t.ok(page.data.every((m) => m.object === 'model' && typeof m.created === 'number' && typeof m.owned_by === 'string'));
  const one = await openai.models.retrieve('local/text-mini');
  t.equal(one.id, 'local/text-mini');
  t.type(await openai.models.retrieve('nope/nothing').catch((e) => e), NotFoundError);
});

t.test('errors come in OpenAI shape and map to the SDK classes', async (t) => {
  const { server, openai, key } = await client();
  const bad = new OpenAI({ baseURL: `${server.url}/openai/v1`, apiKey: `gs_live_${'x'.repeat(64)}`, maxRetries: 0 });
  t.type(await bad.chat.completions.create({ model: 'local/text-mini', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e), AuthenticationError);
  const unknownModel = await openai.chat.completions.create({ model: 'nope/x', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
  t.type(unknownModel, NotFoundError);
  t.equal(unknownModel.code, 'model_not_found');
  t.equal(unknownModel.param, 'model');
  const unknownField = await openai.chat.completions
    .create({ model: 'local/text-mini', messages: [{ role: 'user', content: 'hi' }], logit_bias: { '1': 2 } })
    .catch((e) => e);
  t.type(unknownField, BadRequestError);
  t.equal(unknownField.param, 'logit_bias');
  t.equal(unknownField.code, 'unknown_parameter');
  const n2 = await openai.chat.completions.create({ model: 'local/text-mini', messages: [{ role: 'user', content: 'hi' }], n: 2 }).catch((e) => e);
  t.type(n2, BadRequestError);
  t.equal(n2.param, 'n');
  const options = await openai.chat.completions
    .create({ model: 'local/text-mini', messages: [{ role: 'user', content: 'hi' }], stream_options: { include_usage: true } })
    .catch((e) => e);
  t.type(options, BadRequestError);
  t.equal(options.param, 'stream_options');
  const tooHot = await openai.chat.completions
    .create({ model: 'local/text-mini', messages: [{ role: 'user', content: 'hi' }], temperature: 3 })
    .catch((e) => e);
  t.type(tooHot, BadRequestError);
  t.equal(tooHot.param, 'temperature');
  const readOnly = await client(['generations.read']);
  t.type(
    await readOnly.openai.chat.completions.create({ model: 'local/text-mini', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e),
    PermissionDeniedError,
  );
  // The raw body: OpenAI's four fields.
  const raw = await server.json('/openai/v1/chat/completions', { method: 'POST', headers: withKey(key), body: JSON.stringify({ model: 'local/text-mini' }) });
  t.equal(raw.status, 400);
  t.same(Object.keys(raw.body.error).sort(), ['code', 'message', 'param', 'type']);
  t.equal(raw.body.error.param, 'messages');
  t.equal(raw.body.error.type, 'invalid_request_error');
});

t.test('every answer names its generation, streamed too; a replay of an ended job answers it again', async (t) => {
  const { server, user, key, openai } = await client();
  const body = { model: 'local/text-mini', messages: [{ role: 'user' as const, content: 'Say it twice.' }] };
  // Streamed: the header comes with the stream's head.
  const streamed = await openai.chat.completions.create({ ...body, stream: true }, { headers: { 'Idempotency-Key': 'door-replay-streamed' } }).withResponse();
  const streamedId = streamed.response.headers.get('x-generation-id');
  t.match(streamedId, /^gen_/, 'a streamed answer carries X-Generation-Id');
  let text = '';
  for await (const chunk of streamed.data) text += chunk.choices[0]?.delta.content ?? '';
  t.ok(text.length > 0, 'the streamed answer has text');
  // Its job has ended: the same key and body answer it again, streamed, as one piece.
  const again = await openai.chat.completions.create({ ...body, stream: true }, { headers: { 'Idempotency-Key': 'door-replay-streamed' } }).withResponse();
  t.equal(again.response.headers.get('x-generation-id'), streamedId, 'the same generation');
  t.equal(again.response.headers.get('idempotent-replayed'), 'true');
  let replayed = '';
  for await (const chunk of again.data) replayed += chunk.choices[0]?.delta.content ?? '';
  t.equal(replayed, text, 'the same answer');

  // Whole: the first answer, then a replay of its ended job.
  const first = await openai.chat.completions.create(body, { headers: { 'Idempotency-Key': 'door-replay-whole' } }).withResponse();
  const wholeId = first.response.headers.get('x-generation-id');
  t.match(wholeId, /^gen_/);
  const replay = await openai.chat.completions.create(body, { headers: { 'Idempotency-Key': 'door-replay-whole' } }).withResponse();
  t.equal(replay.response.headers.get('x-generation-id'), wholeId, 'the same generation');
  t.equal(replay.response.headers.get('idempotent-replayed'), 'true');
  t.equal(replay.data.choices[0]!.message.content, first.data.choices[0]!.message.content, 'the same answer');
  const list = await server.json(`/v1/generations?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  t.equal(list.body.data.length, 2, 'two generations made, not four');
});

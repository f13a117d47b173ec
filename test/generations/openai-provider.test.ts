import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { setPlan } from './support.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from './flow.ts';
import { eventually } from '../helpers/eventually.ts';

const API_KEY = 'sk-test-0123456789';

interface Seen {
  path: string;
  authorization: string | undefined;
  body: any;
}

/**
 * A small OpenAI-compatible server on loopback. What it answers depends on the prompt:
 * `fail500`, `fail429`, `notjson`, `hang` (never answers), `url` (images as URLs of its own), `empty`;
 * anything else is a normal answer.
 */
async function fakeOpenAi(t: Test) {
  const seen: Seen[] = [];
  const hanging = new Set<http.ServerResponse>();
  let closedEarly = 0;
  const png = (w: number, h: number) => makePng(w, h);
  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      raw += c;
    });
    req.on('end', () => {
      if (req.method === 'GET' && req.url?.startsWith('/files/')) {
        res.writeHead(200, { 'content-type': 'image/png' }).end(png(24, 12));
        return;
      }
      const body = raw ? JSON.parse(raw) : undefined;
      seen.push({ path: req.url ?? '', authorization: req.headers.authorization, body });
      const prompt: string = body?.prompt ?? body?.messages?.at(-1)?.content ?? '';
      const json = (status: number, value: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      if (req.headers.authorization !== `Bearer ${API_KEY}`) return json(401, { error: { message: 'Incorrect API key provided.' } });
      if (prompt.includes('fail500')) return json(500, { error: { message: 'The server had an error while processing your request.', type: 'server_error' } });
      if (prompt.includes('fail429')) return json(429, { error: { message: 'Rate limit reached for requests.', type: 'requests' } });
      if (prompt.includes('notjson')) return res.writeHead(200, { 'content-type': 'text/html' }).end('<html>gateway</html>');
      // A chat answer, streamed as OpenAI streams when asked (the adapter asks): chunks, the usage chunk, [DONE].
      const chat = (content: string | undefined) => {
        if (!body?.stream) {
          return json(
            200,
            content === undefined
              ? { choices: [] }
              : {
                  id: 'chatcmpl-1',
                  object: 'chat.completion',
                  model: body.model,
                  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
                },
          );
        }
        const chunk = (choices: unknown[], usage: unknown = null) =>
          `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: body.model, choices, usage })}\n\n`;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        if (content !== undefined) {
          res.write(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]));
          res.write(chunk([{ index: 0, delta: { content }, finish_reason: null }]));
          res.write(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]));
          res.write(chunk([], { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 }));
        }
        res.end('data: [DONE]\n\n');
      };
      if (prompt.includes('empty')) return req.url === '/v1/chat/completions' ? chat(undefined) : json(200, { data: [] });
      if (prompt.includes('nulerror')) return json(500, { error: { message: 'bad\u0000byte \ud800 here', type: 'server_error' } });
      if (prompt.includes('nultext')) return chat('a\u0000b\ud800c');
      if (prompt.includes('hang')) {
        hanging.add(res);
        res.on('close', () => {
          if (hanging.delete(res)) closedEarly++;
        });
        return;
      }
      if (req.url === '/v1/chat/completions') return chat(`echo: ${prompt}`);
      if (req.url === '/v1/images/generations') {
        const [w, h] = String(body.size)
          .split('x')
          .map((n) => Math.round(Number(n) / 64));
        const { port } = server.address() as AddressInfo;
        const data = Array.from({ length: prompt.includes('short') ? body.n - 1 : body.n }, (_, i) =>
          prompt.includes('url') ? { url: `http://127.0.0.1:${port}/files/${i}.png` } : { b64_json: png(w!, h!).toString('base64') },
        );
        return json(200, { created: 1, data });
      }
      json(404, { error: { message: 'no such route' } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, seen, closedEarly: () => closedEarly, hanging: () => hanging.size };
}

t.test('the OpenAI-compatible adapter: chat completions, images as b64_json and as URLs, errors and time-outs end in failed with a clear code', async (t) => {
  const upstream = await fakeOpenAi(t);
  const server = await startTestServer(t, {
    env: {
      OPENAI_BASE_URL: upstream.url,
      OPENAI_API_KEY: API_KEY,
      OPENAI_CHAT_MODEL: 'gpt-test-chat',
      OPENAI_IMAGE_MODEL: 'img-test',
      OPENAI_TIMEOUT_MS: '1000',
      ALLOW_PRIVATE_EGRESS: 'true',
      LOCAL_PROVIDER_LATENCY_MS: '0',
      // A job's deadline at its provider: a 429 is waited out until then, then fails.
      PROVIDER_JOB_TIMEOUT_MS: '2500',
    },
  });
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'pro');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
  const query = serverQuery(server);
  const run = async (model: string, mode: string, params: Record<string, unknown>) => {
    const created = await createGeneration(server, key, user.workspaceId, { mode, model, params });
    t.equal(created.status, 201, JSON.stringify(created.body));
    return waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  };

  const models = await server.json(`/v1/models?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  const ids = (models.body.data ?? models.body).map((m: { id: string }) => m.id);
  t.ok(ids.includes('openai/chat') && ids.includes('openai/image'), 'the openai/* models are offered once configured');

  const chat = await run('openai/chat', 'text_to_text', { prompt: 'Hello there', systemPrompt: 'Be brief.', temperature: 0.5, maxTokens: 64, seed: 9 });
  t.equal(chat.status, 'succeeded', JSON.stringify(chat));
  t.equal(chat.textOutput, 'echo: Hello there');
  t.same(
    chat.timeline.map((e) => e.status),
    ['queued', 'reserved', 'submitted', 'running', 'succeeded'],
  );
  const chatCall = upstream.seen.find((s) => s.path === '/v1/chat/completions')!;
  t.equal(chatCall.authorization, `Bearer ${API_KEY}`, 'the key goes in the Authorization header');
  t.same(chatCall.body, {
    model: 'gpt-test-chat',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello there' },
    ],
    temperature: 0.5,
    max_tokens: 64,
    seed: 9,
    stream: true,
    stream_options: { include_usage: true },
  });

  const b64 = await run('openai/image', 'text_to_image', { prompt: 'a boat', numImages: 2, aspectRatio: '16:9' });
  t.equal(b64.status, 'succeeded', JSON.stringify(b64));
  t.equal(b64.outputAssetIds.length, 2);
  const imageCall = upstream.seen.find((s) => s.path === '/v1/images/generations')!;
  // A model of no family the adapter knows gets the sizes of the current image models (docs/providers/openai.md).
  t.same(imageCall.body, { model: 'img-test', prompt: 'a boat', n: 2, size: '1536x1024', response_format: 'b64_json' });
  for (const id of b64.outputAssetIds) {
    const link = await server.json(`/v1/assets/${id}/download?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
    const bytes = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
    t.equal(sniffContentType(bytes), 'image/png');
    t.same(imageDimensions(bytes), { width: 24, height: 16 }, 'the bytes the server sent, stored as they came');
  }

  const viaUrl = await run('openai/image', 'text_to_image', { prompt: 'url please', numImages: 1 });
  t.equal(viaUrl.status, 'succeeded', JSON.stringify(viaUrl));
  const [asset] = await query<{ width: number; height: number; content_type: string; source_generation_id: string }>(
    'select width, height, content_type, source_generation_id from assets where id = ?',
    [viaUrl.outputAssetIds[0]],
  );
  t.same(asset, { width: 24, height: 12, content_type: 'image/png', source_generation_id: viaUrl.id }, 'an image URL is fetched and stored');

  const failures: Array<[string, string, Record<string, unknown>, string, RegExp]> = [
    ['openai/chat', 'text_to_text', { prompt: 'fail500' }, 'provider_error', /answered 500: The server had an error/],
    ['openai/image', 'text_to_image', { prompt: 'fail429' }, 'provider_rate_limited', /answered 429/],
    ['openai/chat', 'text_to_text', { prompt: 'notjson' }, 'provider_bad_response', /chat stream ended before its answer did/],
    ['openai/chat', 'text_to_text', { prompt: 'empty' }, 'provider_bad_response', /chat stream ended before its answer did/],
    ['openai/image', 'text_to_image', { prompt: 'empty' }, 'provider_bad_response', /no images/],
    ['openai/image', 'text_to_image', { prompt: 'short', numImages: 3 }, 'provider_bad_response', /2 of the 3 images/],
    ['openai/chat', 'text_to_text', { prompt: 'hang' }, 'provider_timeout', /sent nothing for 1000 ms/],
  ];
  for (const [model, mode, params, code, message] of failures) {
    const failed = await run(model, mode, params);
    t.equal(failed.status, 'failed', `${params.prompt}: failed`);
    t.equal(failed.errorCode, code, `${params.prompt}: ${code}`);
    t.match(failed.errorMessage, message);
    t.equal(failed.timeline.at(-1)!.detail, code, 'the code is in the timeline');
  }
  const money = await moneyOf(query, user.workspaceId);
  // pro: 3,000 credits; chat 2, two images 16, one image 8 were captured; the failures were released.
  t.same(money, { available: 3_000 - 2 - 16 - 8, reserved: 0, ledgerAvailable: 3_000 - 26, ledgerReserved: 0, reservations: [] });
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  t.equal(Object.values(ledger).filter((l) => l.release === 1).length, failures.length, 'every failure released its credits');

  // Text the database cannot store (U+0000, an unpaired surrogate) in a provider's answer or error is kept
  // with U+FFFD in its place: the job still settles instead of failing its write.
  const nulText = await run('openai/chat', 'text_to_text', { prompt: 'nultext' });
  t.equal(nulText.status, 'succeeded', JSON.stringify(nulText));
  t.equal(nulText.textOutput, 'a\ufffdb\ufffdc');
  const nulError = await run('openai/chat', 'text_to_text', { prompt: 'nulerror' });
  t.equal(nulError.status, 'failed', JSON.stringify(nulError));
  t.equal(nulError.errorCode, 'provider_error');
  t.match(nulError.errorMessage, /bad\ufffdbyte \ufffd here/);
  const settled = await moneyOf(query, user.workspaceId);
  t.same([settled.reserved, settled.ledgerReserved], [0, 0], 'nothing stays reserved');
});

t.test('an image URL the server answers with goes through the egress guard: a loopback URL is refused unless ALLOW_PRIVATE_EGRESS', async (t) => {
  const upstream = await fakeOpenAi(t);
  // The operator's base URL is trusted; the URLs in its answers are not.
  const server = await startTestServer(t, { env: { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: API_KEY, ALLOW_PRIVATE_EGRESS: 'false' } });
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'team');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: 'openai/image', params: { prompt: 'url please' } });
  const failed = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  t.equal(failed.status, 'failed');
  t.equal(failed.errorCode, 'provider_output_fetch_failed');
  t.match(failed.errorMessage, /could not be fetched/);
  const money = await moneyOf(serverQuery(server), user.workspaceId);
  t.equal(money.reserved, 0);
  t.equal(money.available, 12_000, 'released');
});

t.test('cancelling a job whose request is in flight aborts the request', async (t) => {
  const upstream = await fakeOpenAi(t);
  const server = await startTestServer(t, { env: { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: API_KEY, OPENAI_TIMEOUT_MS: '600000' } });
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'pro');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'openai/chat', params: { prompt: 'hang' } });
  await waitFor(server, key, user.workspaceId, created.body.id, (g) => g.status === 'running', 'running');
  await eventually(() => upstream.hanging() !== 0, { timeoutMs: 10_000, what: 'the request reaching the fake' });
  t.equal(upstream.hanging(), 1, 'the request reached the server');
  const cancelled = await server.json(`/v1/generations/${created.body.id}/cancel?workspaceId=${user.workspaceId}`, { method: 'POST', headers: withKey(key) });
  t.equal(cancelled.status, 200);
  await eventually(() => upstream.closedEarly() !== 0, { timeoutMs: 10_000, what: 'the request going away' });
  t.equal(upstream.closedEarly(), 1, 'the server saw the request go away');
});

t.test('without OPENAI_BASE_URL the openai/* models are not offered and cannot be used', async (t) => {
  const server = await startTestServer(t);
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'pro');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'openai/chat', params: { prompt: 'x' } });
  t.equal(created.status, 400);
  t.match(created.body.error?.message, /unknown model "openai\/chat"/);
});

t.test("traced: the provider call is a span of the generation's trace, with its HTTP request (undici instrumentation) under it", async (t) => {
  const upstream = await fakeOpenAi(t);
  const exporter = new InMemorySpanExporter();
  const server = await startTestServer(t, {
    spanExporter: exporter,
    env: {
      OPENAI_BASE_URL: upstream.url,
      OPENAI_API_KEY: API_KEY,
      OPENAI_CHAT_MODEL: 'gpt-test-chat',
      OPENAI_TIMEOUT_MS: '5000',
      ALLOW_PRIVATE_EGRESS: 'true',
    },
  });
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'pro');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'openai/chat', params: { prompt: 'Hello there' } });
  t.equal(created.status, 201, JSON.stringify(created.body));
  const done = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  t.equal(done.status, 'succeeded');
  const spans = await eventually(
    () => {
      const finished = exporter.getFinishedSpans();
      return finished.some((s) => s.name === 'provider openai') && finished;
    },
    { timeoutMs: 20_000, everyMs: 20, what: 'the provider span' },
  );
  const provider = spans.find((s) => s.name === 'provider openai' && s.attributes['generation.id'] === created.body.id);
  t.match(provider?.attributes, { 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'openai/chat' });
  const create = spans.find((s) => s.name === 'POST /v1/generations');
  t.equal(provider?.spanContext().traceId, create?.spanContext().traceId, 'in the trace of the create');
  const call = spans.find((s) => s.parentSpanContext?.spanId === provider?.spanContext().spanId && s.attributes['http.request.method'] === 'POST');
  t.ok(call, 'the HTTP request to the provider is its child');
  t.match(String(call?.attributes['url.full']), /\/chat\/completions$/);
  t.equal(call?.attributes['http.response.status_code'], 200);
});

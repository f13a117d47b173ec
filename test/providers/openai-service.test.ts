import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { dataUrl, downloadAsset, looksLikeMp3, STARTING_CREDITS, writeTestCatalog } from '../helpers/provider-service.ts';
import { imageDimensions, sniffContentType } from '../../providers/local/sniff.ts';
import { startFakeOpenAi, type UploadedFile } from '../fakes/openai.ts';
import { createGeneration, getGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor, type Gen } from '../generations/flow.ts';

/**
 * The OpenAI adapter through the public API: the real server, a catalog file naming openai deployments, and
 * the strict fake as the upstream. Each mode is created with POST /v1/generations, followed to its end, its
 * outputs downloaded and decoded; a token-priced model is charged what the fake's `usage` said.
 */
const fake = await startFakeOpenAi();
t.teardown(() => fake.close());

// Credits per 1,000 tokens: a quarter of a credit per input token, half a credit per output token.
const INPUT_PER_1K = 250;
const OUTPUT_PER_1K = 500;
const NANO = 1_000_000_000n;

const catalogFile = writeTestCatalog(t, [
  {
    id: 'acme/writer',
    mode: 'text_to_text',
    price: { per: 'tokens', inputPer1k: INPUT_PER_1K, outputPer1k: OUTPUT_PER_1K },
    parameters: { prompt: { required: true }, systemPrompt: {}, maxTokens: { maximum: 256, default: 64 } },
    deployments: [{ id: 'writer-openai', provider: 'openai', target: { model: 'gpt-4o-mini' } }],
  },
  {
    id: 'acme/painter',
    mode: 'text_to_image',
    price: { per: 'image', credits: 5 },
    parameters: { prompt: { required: true }, aspectRatio: {}, numImages: { maximum: 2 } },
    deployments: [{ id: 'painter-openai', provider: 'openai', target: { model: 'gpt-image-1' } }],
  },
  {
    id: 'acme/retoucher',
    mode: 'image_to_image',
    price: { per: 'job', credits: 4 },
    parameters: { prompt: { required: true } },
    deployments: [{ id: 'retoucher-openai', provider: 'openai', target: { model: 'gpt-image-1' } }],
  },
  {
    id: 'acme/narrator',
    mode: 'text_to_audio',
    price: { per: 'job', credits: 3 },
    parameters: { prompt: { required: true }, voice: {}, format: {} },
    deployments: [{ id: 'narrator-openai', provider: 'openai', target: { model: 'tts-1' } }],
  },
]);

const server = await startTestServer(t, {
  env: {
    CATALOG_FILE: catalogFile,
    OPENAI_BASE_URL: fake.url,
    OPENAI_API_KEY: fake.apiKey,
    OPENAI_TIMEOUT_MS: '5000',
    ALLOW_PRIVATE_EGRESS: 'true',
    PROVIDER_POLL_MS: '50',
  },
});
const query = serverQuery(server);

async function workspace() {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'assets.read']);
  const create = async (model: string, mode: string, params: Record<string, unknown>, inputs?: Record<string, unknown>) => {
    const created = await createGeneration(server, key, user.workspaceId, { model, mode, params, ...(inputs ? { inputs } : {}) });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
    return created.body;
  };
  const settle = (id: string) => waitFor(server, key, user.workspaceId, id, isTerminal, 'a terminal state');
  return { workspaceId: user.workspaceId, key, create, settle };
}

const providerJobIdOf = async (id: string) =>
  (await query<{ provider_job_id: string }>('select provider_job_id from generations where id = ?', [id]))[0]!.provider_job_id;

/** The request the fake received for a generation (the adapter's provider job id rides as X-Client-Request-Id). */
const requestOf = async (id: string) => {
  const jobId = await providerJobIdOf(id);
  const found = fake.received.filter((r) => r.headers['x-client-request-id'] === jobId).at(-1);
  if (!found) throw new Error(`the fake received nothing for ${id}`);
  return found;
};

const ledgerOf = (id: string) =>
  query<{ kind: string; credits: number; reserved_credits: number }>(
    `select kind, credits, reserved_credits from credit_ledger where generation_id = ?
     order by case kind when 'reserve' then 0 when 'capture' then 1 else 2 end`,
    [id],
  );

const carryOf = async (workspaceId: string) =>
  BigInt(
    (await query<{ token_carry_nano: string }>('select token_carry_nano from workspace_accounts where workspace_id = ?', [workspaceId]))[0]!.token_carry_nano,
  );

/** What the fake said a job used, and its exact cost in billionths of a credit. */
function costOf(usage: { prompt_tokens: number; completion_tokens: number }): bigint {
  return BigInt(INPUT_PER_1K * 1_000_000) * BigInt(usage.prompt_tokens) + BigInt(OUTPUT_PER_1K * 1_000_000) * BigInt(usage.completion_tokens);
}

/** The most a chat job can cost: its prompt's bytes plus 8 tokens in, its maxTokens out (docs/catalog.md, "Prices"), rounded up. */
function boundOf(prompt: string, maxTokens: number): number {
  return Math.ceil(((Buffer.byteLength(prompt) + 8) * INPUT_PER_1K + maxTokens * OUTPUT_PER_1K) / 1000);
}

/** A generation as the API shows it, with the token usage of a token-priced job. */
type Billed = Gen & { usage?: { inputTokens: number; outputTokens: number } };

const hasKey = (g: Gen) => JSON.stringify(g).includes(fake.apiKey) || JSON.stringify(g).includes(fake.apiKey.slice(-12));

t.test('text_to_text priced per token: the bound reserved at creation, the usage charged, the rest released, the carry taken into the next job', async (t) => {
  const ws = await workspace();
  const first = 'Write a haiku about queues.';
  const created = await ws.create('acme/writer', 'text_to_text', { prompt: first, maxTokens: 64 });
  const bound = boundOf(first, 64);
  t.equal(created.credits, bound, "the generation's credits at creation are its bound");
  t.equal((created as Billed).usage, undefined, 'no usage before it ran');

  const done = await ws.settle(created.id);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(done.textOutput, `echo: ${first}`);
  const jobId = await providerJobIdOf(done.id);
  const sent = await requestOf(done.id);
  t.same(
    sent.body,
    { model: 'gpt-4o-mini', messages: [{ role: 'user', content: first }], max_tokens: 64, stream: true, stream_options: { include_usage: true } },
    'maxTokens goes as max_tokens; the answer is streamed, with its usage',
  );
  t.equal(fake.streams.get(await providerJobIdOf(done.id))?.ended, 'done', 'streamed to its end');
  const usage = fake.usage.get(jobId)!;
  t.ok(usage, 'the fake reported a usage');
  t.same((done as Billed).usage, { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens }, 'the usage is shown on the generation');
  const [stored] = await query<{ usage: unknown }>('select usage from generations where id = ?', [done.id]);
  t.same(
    typeof stored!.usage === 'string' ? JSON.parse(stored!.usage) : stored!.usage,
    { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens },
    'and kept on the row',
  );

  const exact1 = costOf(usage);
  const charged1 = Number(exact1 / NANO);
  t.ok(charged1 > 0 && charged1 < bound, `charged ${charged1} of the ${bound} reserved`);
  t.equal(done.credits, charged1, "the generation's credits after are what it was charged");
  t.same(
    await ledgerOf(done.id),
    [
      { kind: 'reserve', credits: -bound, reserved_credits: bound },
      { kind: 'capture', credits: 0, reserved_credits: -charged1 },
      { kind: 'release', credits: bound - charged1, reserved_credits: -(bound - charged1) },
    ],
    'reserved once; one capture of what was used, one release of the rest',
  );
  const carry1 = exact1 - BigInt(charged1) * NANO;
  t.equal(await carryOf(ws.workspaceId), carry1, 'the fraction not charged is carried');
  t.same(
    await moneyOf(query, ws.workspaceId),
    {
      available: STARTING_CREDITS - charged1,
      reserved: 0,
      ledgerAvailable: STARTING_CREDITS - charged1,
      ledgerReserved: 0,
      reservations: [],
    },
    'the balance equals the ledger',
  );

  // A job whose own cost has a fraction that, with the carry, makes one more whole credit.
  const second = 'Count to ten, slowly';
  const next = await ws.create('acme/writer', 'text_to_text', { prompt: second, maxTokens: 32 });
  t.equal(next.credits, boundOf(second, 32));
  const done2 = await ws.settle(next.id);
  t.equal(done2.status, 'succeeded', JSON.stringify(done2));
  const exact2 = costOf(fake.usage.get(await providerJobIdOf(done2.id))!);
  const charged2 = Number((exact2 + carry1) / NANO);
  t.equal(done2.credits, charged2, 'charged the whole credits of its cost plus the carry');
  t.equal(charged2, Number(exact2 / NANO) + 1, 'the carry made one more credit');
  t.equal(charged1 + charged2, Number((exact1 + exact2) / NANO), 'two jobs cost their exact sum rounded down');
  t.equal(await carryOf(ws.workspaceId), exact1 + exact2 - BigInt(charged1 + charged2) * NANO);
  const money = await moneyOf(query, ws.workspaceId);
  t.same(money, {
    available: STARTING_CREDITS - charged1 - charged2,
    reserved: 0,
    ledgerAvailable: STARTING_CREDITS - charged1 - charged2,
    ledgerReserved: 0,
    reservations: [],
  });
  const ledger = await ledgerByGeneration(query, ws.workspaceId);
  t.same(ledger[done2.id], { reserve: 1, capture: 1, release: 1 });
});

t.test('text_to_image: two images at 16:9, stored as the fake made them, downloaded and decoded', async (t) => {
  const ws = await workspace();
  const created = await ws.create('acme/painter', 'text_to_image', { prompt: 'a lighthouse at dawn', numImages: 2, aspectRatio: '16:9' });
  t.equal(created.credits, 10);
  const done = await ws.settle(created.id);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.same(
    done.timeline.map((e) => e.status),
    ['queued', 'reserved', 'submitted', 'running', 'succeeded'],
  );
  const sent = await requestOf(done.id);
  t.same(sent.body, { model: 'gpt-image-1', prompt: 'a lighthouse at dawn', n: 2, size: '1536x1024' }, 'no response_format for a GPT image model');
  t.equal(done.outputAssetIds.length, 2);
  for (const id of done.outputAssetIds) {
    const bytes = await downloadAsset(server, ws.key, ws.workspaceId, id);
    t.equal(sniffContentType(bytes), 'image/png');
    t.same(imageDimensions(bytes), { width: 1536, height: 1024 });
  }
  t.equal((done as Billed).usage, undefined, 'an image job priced per image shows no token usage');
  t.same((await ledgerByGeneration(query, ws.workspaceId))[done.id], { reserve: 1, capture: 1 }, 'captured once');
  t.same(await moneyOf(query, ws.workspaceId), {
    available: STARTING_CREDITS - 10,
    reserved: 0,
    ledgerAvailable: STARTING_CREDITS - 10,
    ledgerReserved: 0,
    reservations: [],
  });
});

t.test('image_to_image: the input given as a data URL goes to the edits endpoint as a multipart PNG file', async (t) => {
  const ws = await workspace();
  const input = makePng(48, 48);
  const created = await ws.create('acme/retoucher', 'image_to_image', { prompt: 'as a woodcut' }, { imageUrls: [dataUrl('image/png', input)] });
  const done = await ws.settle(created.id);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  const sent = await requestOf(done.id);
  t.equal(sent.path, '/images/edits');
  t.match(sent.contentType, /^multipart\/form-data; boundary=/);
  const image = sent.body!.image as UploadedFile;
  t.equal(image.type, 'image/png', 'the file part carries its type');
  t.ok(image.bytes.equals(input), 'the very bytes given');
  t.same(
    { model: sent.body!.model, prompt: sent.body!.prompt, n: sent.body!.n, size: sent.body!.size },
    { model: 'gpt-image-1', prompt: 'as a woodcut', n: '1', size: '1024x1024' },
  );
  t.equal(done.outputAssetIds.length, 1);
  const bytes = await downloadAsset(server, ws.key, ws.workspaceId, done.outputAssetIds[0]!);
  t.equal(sniffContentType(bytes), 'image/png');
  t.same(imageDimensions(bytes), { width: 1024, height: 1024 });
  t.same(await moneyOf(query, ws.workspaceId), {
    available: STARTING_CREDITS - 4,
    reserved: 0,
    ledgerAvailable: STARTING_CREDITS - 4,
    ledgerReserved: 0,
    reservations: [],
  });
});

t.test('text_to_audio: speech as mp3, stored as audio/mpeg, its bytes an MP3 file', async (t) => {
  const ws = await workspace();
  const created = await ws.create('acme/narrator', 'text_to_audio', { prompt: 'Welcome aboard.', voice: 'ember', format: 'mp3' });
  const done = await ws.settle(created.id);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  const sent = await requestOf(done.id);
  t.same(sent.body, { model: 'tts-1', input: 'Welcome aboard.', voice: 'coral', response_format: 'mp3' }, "our voice ember is OpenAI's coral");
  const bytes = await downloadAsset(server, ws.key, ws.workspaceId, done.outputAssetIds[0]!);
  t.ok(looksLikeMp3(bytes), `an MP3 file (starts ${bytes.subarray(0, 4).toString('hex')})`);
  t.equal(sniffContentType(bytes), 'audio/mpeg');
  const [asset] = await query<{ content_type: string }>('select content_type from assets where id = ?', [done.outputAssetIds[0]]);
  t.equal(asset!.content_type, 'audio/mpeg');
  t.same((await ledgerByGeneration(query, ws.workspaceId))[done.id], { reserve: 1, capture: 1 });
});

t.test('a 429 with Retry-After is waited out: the job stays running with a note in its timeline, then succeeds, charged once', async (t) => {
  const ws = await workspace();
  fake.next('/chat/completions', { kind: 'rate-limit', retryAfter: '1' });
  const created = await ws.create('acme/writer', 'text_to_text', { prompt: 'Patience, please.', maxTokens: 16 });
  const waiting = await waitFor(
    server,
    ws.key,
    ws.workspaceId,
    created.id,
    (g) => g.timeline.some((e) => /429/.test(e.detail ?? '')) || isTerminal(g),
    'a 429 note',
  );
  t.equal(waiting.status, 'running', 'running while the wait lasts');
  t.match(waiting.timeline.at(-1), { status: 'running', detail: /OpenAI answered 429 \(rate limited\); trying again in 1000 ms/ });
  const done = await ws.settle(created.id);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  const jobId = await providerJobIdOf(done.id);
  t.equal(fake.submissions.get(jobId), 2, 'the call, and once more after the wait');
  const exact = costOf(fake.usage.get(jobId)!);
  t.equal(done.credits, Number(exact / NANO), 'charged what the second answer used, once');
  t.same((await ledgerByGeneration(query, ws.workspaceId))[done.id], { reserve: 1, capture: 1, release: 1 });
  const money = await moneyOf(query, ws.workspaceId);
  t.equal(money.available, money.ledgerAvailable);
  t.equal(money.reserved, 0);
});

t.test("failures end failed with the documented code and the upstream's words, never the key, and release the money", async (t) => {
  const ws = await workspace();
  const cases: Array<{
    path: '/chat/completions' | '/images/generations';
    behaviour: Parameters<typeof fake.next>[1];
    model: string;
    mode: string;
    code: string;
    message: RegExp;
  }> = [
    {
      path: '/chat/completions',
      behaviour: { kind: 'echo-key' },
      model: 'acme/writer',
      mode: 'text_to_text',
      code: 'provider_input_rejected',
      message: /Bad request with Authorization: Bearer/,
    },
    {
      path: '/chat/completions',
      behaviour: { kind: 'server-error' },
      model: 'acme/writer',
      mode: 'text_to_text',
      code: 'provider_error',
      message: /The server had an error while processing your request/,
    },
    {
      path: '/chat/completions',
      behaviour: { kind: 'rate-limit', code: 'insufficient_quota' },
      model: 'acme/writer',
      mode: 'text_to_text',
      code: 'provider_rate_limited',
      message: /You exceeded your current quota/,
    },
    {
      path: '/images/generations',
      behaviour: { kind: 'content-policy' },
      model: 'acme/painter',
      mode: 'text_to_image',
      code: 'provider_content_policy',
      message: /rejected as a result of our safety system/,
    },
    {
      path: '/images/generations',
      behaviour: { kind: 'overloaded' },
      model: 'acme/painter',
      mode: 'text_to_image',
      code: 'provider_unavailable',
      message: /currently overloaded/,
    },
  ];
  for (const c of cases) {
    fake.next(c.path, c.behaviour);
    const created = await ws.create(c.model, c.mode, { prompt: `a job that meets ${c.behaviour.kind}` });
    const failed = await ws.settle(created.id);
    t.equal(failed.status, 'failed', `${c.behaviour.kind}: failed`);
    t.equal(failed.errorCode, c.code, `${c.behaviour.kind}: ${c.code}`);
    t.match(failed.errorMessage, c.message, `${c.behaviour.kind}: the upstream's message`);
    t.notOk(hasKey(failed), `${c.behaviour.kind}: the key is nowhere in the generation`);
    t.same((await ledgerByGeneration(query, ws.workspaceId))[failed.id], { reserve: 1, release: 1 }, `${c.behaviour.kind}: released, not captured`);
  }
  const echoed = await getGeneration(
    server,
    ws.key,
    ws.workspaceId,
    (await query<{ id: string }>('select id from generations where workspace_id = ? and error_code = ? ', [ws.workspaceId, 'provider_input_rejected']))[0]!.id,
  );
  t.match(echoed.errorMessage, /Bearer \[redacted\] \(key \[redacted\]\)/, 'the echoed key is replaced');
  t.same(
    await moneyOf(query, ws.workspaceId),
    { available: STARTING_CREDITS, reserved: 0, ledgerAvailable: STARTING_CREDITS, ledgerReserved: 0, reservations: [] },
    'nothing charged',
  );
});

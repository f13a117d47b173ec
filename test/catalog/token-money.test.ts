import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { openDatabase } from '../../persistence/database.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { startNode } from '../fixtures/child.ts';
import { createGeneration, httpClient, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from '../generations/flow.ts';
import { catalogFile, plan, textModel, until } from './support.ts';

/**
 * Money of token-priced jobs (docs/catalog.md, "Rounding"), recomputed here from what each generation stored
 * (its price terms and the usage its provider reported) with the arithmetic written out, not the service's
 * own function: each job's charge is the whole credits of its exact cost plus the carry, the carry kept on the
 * account is what is left, a usage past the reservation is charged the reservation, and all of it holds
 * across kill -9. PGlite, or PostgreSQL (and Redis) with TEST_DATABASE_URL/TEST_REDIS_URL.
 */

type Query = <R>(sql: string, params: unknown[]) => Promise<R[]>;
const NANO = 1_000_000_000n;

/** A price with fractions of a credit, so that charges round and carries move. */
const TOKEN_PRICE = { per: 'tokens', inputPer1k: 3.7, outputPer1k: 19.3 };
const tokenModel = textModel('acme/tokens', TOKEN_PRICE, ['basic']);

const json = <T>(value: unknown): T => (typeof value === 'string' ? JSON.parse(value) : value) as T;

interface Books {
  jobs: number;
  captured: number;
  /** Sums over the workspace's captured jobs, billionths of a credit. */
  exactNano: bigint;
  chargedNano: bigint;
  carryNano: bigint;
}

/**
 * Replays a workspace's captures in the order they were written (ledger ids grow in time) and checks each
 * charge against floor(exact + carry), capped at the reservation; returns the sums and the account's carry.
 */
async function replay(t: Test, query: Query, workspaceId: string): Promise<Books> {
  const jobs = await query<{ id: string; status: string; credits: number; token_terms: unknown; usage: unknown }>(
    'select id, status, credits, token_terms, usage from generations where workspace_id = ?',
    [workspaceId],
  );
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const entries = await query<{ id: string; kind: string; generation_id: string; reserved_credits: number }>(
    `select id, kind, generation_id, reserved_credits from credit_ledger where workspace_id = ? and generation_id is not null order by id`,
    [workspaceId],
  );
  const reservedOf = new Map(entries.filter((e) => e.kind === 'reserve').map((e) => [e.generation_id, Number(e.reserved_credits)]));
  let carry = 0n;
  const books: Books = { jobs: jobs.length, captured: 0, exactNano: 0n, chargedNano: 0n, carryNano: 0n };
  let wrong = 0;
  for (const entry of entries.filter((e) => e.kind === 'capture')) {
    const job = byId.get(entry.generation_id)!;
    const terms = json<{ inputMicroPer1k: number; outputMicroPer1k: number }>(job.token_terms);
    const usage = json<{ inputTokens: number; outputTokens: number }>(job.usage);
    const reserved = reservedOf.get(job.id)!;
    const exact = BigInt(terms.inputMicroPer1k) * BigInt(usage.inputTokens) + BigInt(terms.outputMicroPer1k) * BigInt(usage.outputTokens);
    const owed = exact + carry;
    let expected: bigint;
    if (owed / NANO > BigInt(reserved)) {
      expected = BigInt(reserved);
      carry = 0n;
    } else {
      expected = owed / NANO;
      carry = owed - expected * NANO;
    }
    if (BigInt(job.credits) !== expected && wrong++ < 5)
      t.fail(`${job.id}: charged ${job.credits}, floor(exact + carry) is ${expected} (usage ${JSON.stringify(usage)}, reserved ${reserved})`);
    books.captured++;
    books.exactNano += exact;
    books.chargedNano += BigInt(job.credits) * NANO;
  }
  t.equal(wrong, 0, `each of the ${books.captured} charges is floor(exact + carry), replayed in the order written`);
  const [account] = await query<{ token_carry_nano: string }>('select token_carry_nano from workspace_accounts where workspace_id = ?', [workspaceId]);
  books.carryNano = BigInt(account!.token_carry_nano);
  t.equal(books.carryNano, carry, "the account's carry is the one the replay ends with");
  return books;
}

/** Balance equals the ledger, nothing left reserved, every job reserved once and settled once. */
async function booksBalance(t: Test, query: Query, workspaceId: string): Promise<void> {
  const money = await moneyOf(query, workspaceId);
  t.equal(money.available, money.ledgerAvailable, 'the balance equals the ledger');
  t.equal(money.reserved, 0, 'nothing left reserved');
  t.equal(money.ledgerReserved, 0, 'the ledger holds no reservation');
  const ledger = await ledgerByGeneration(query, workspaceId);
  const odd = Object.entries(ledger).filter(
    ([, kinds]) => kinds.reserve !== 1 || (kinds.capture ?? 0) + (kinds.release ?? 0) < 1 || (kinds.capture ?? 0) > 1 || (kinds.release ?? 0) > 1,
  );
  t.same(odd, [], 'each job reserved once and settled once (a capture, with a release of the rest when it used less)');
}

t.test('many concurrent token-priced jobs in several workspaces: each charge floor(exact + carry), totals within a credit of the exact cost', async (t) => {
  const file = catalogFile(t, { defaultPlan: 'basic', plans: [plan('basic', { concurrentJobs: 8 })], models: [tokenModel] });
  const server = await startTestServer(t, { env: { CATALOG_FILE: file.file, LOCAL_PROVIDER_LATENCY_MS: '0' } });
  await server.recovered;
  const users = await Promise.all([0, 1, 2].map(() => signUp(server)));
  const keys = await Promise.all(users.map((u) => createKey(server, u.cookie, u.workspaceId, ['generations.write', 'generations.read'])));
  const ids: string[][] = users.map(() => []);
  // 3 workspaces × 25 jobs, all sent at once: prompts and maxTokens of many sizes, so exact costs differ.
  await Promise.all(
    users.flatMap((user, w) =>
      Array.from({ length: 25 }, async (_, n) => {
        const prompt = `${'lorem ipsum dolor '.repeat(1 + ((n * 7) % 13))}job ${w}-${n}`;
        const reply = await createGeneration(server, keys[w]!.key, user.workspaceId, {
          mode: 'text_to_text',
          model: 'acme/tokens',
          params: { prompt, maxTokens: 8 + ((n * 37) % 120) },
        });
        if (reply.status !== 201) throw new Error(`create: ${reply.status} ${JSON.stringify(reply.body)}`);
        ids[w]!.push(reply.body.id);
      }),
    ),
  );
  const query = serverQuery(server);
  const workspaceIds = users.map((u) => u.workspaceId);
  const statuses = () =>
    query<{ status: string; n: string }>('select status, count(*)::int8 as n from generations where workspace_id in (?, ?, ?) group by status', workspaceIds);
  const ended = await until(
    'every job ended',
    async () => {
      const counts = await statuses();
      return counts.every((c) => ['succeeded', 'failed', 'cancelled', 'expired'].includes(c.status)) ? counts : undefined;
    },
    30_000,
    50,
  );
  t.same(
    ended.map((c) => [c.status, Number(c.n)]),
    [['succeeded', 75]],
    'every job succeeded',
  );
  for (const user of users) {
    const books = await replay(t, query, user.workspaceId);
    t.equal(books.captured, 25, 'a capture per job');
    t.ok(books.chargedNano <= books.exactNano, `charged ${books.chargedNano / NANO} ≤ exact ${Number(books.exactNano) / 1e9}`);
    t.ok(books.chargedNano > books.exactNano - NANO, 'and more than exact − 1');
    t.equal(books.chargedNano + books.carryNano, books.exactNano, 'charged + carry = exact, to the billionth: nothing lost or made');
    await booksBalance(t, query, user.workspaceId);
  }
  // The answer's usage is the one stored and charged.
  const [one] = await Promise.all([
    server.json(`/v1/generations/${ids[0]![0]}?workspaceId=${users[0]!.workspaceId}`, { headers: { authorization: `Bearer ${keys[0]!.key}` } }),
  ]);
  t.ok(one!.body.usage && Number.isInteger(one!.body.usage.inputTokens) && one!.body.usage.inputTokens > 0, 'the generation shows the tokens it used');
});

/**
 * An OpenAI-compatible upstream that answers every chat completion with far more tokens than any job could
 * have reserved (a provider's counting bug, or a dishonest one): the job is charged its reservation.
 */
async function overCountingUpstream(t: Test, apiKey: string): Promise<{ url: string; calls: number[] }> {
  const calls: number[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const refuse = (status: number, message: string) =>
        res
          .writeHead(status, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: null } }));
      if (req.headers.authorization !== `Bearer ${apiKey}`) return refuse(401, 'Incorrect API key provided.');
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return refuse(404, `Invalid URL (${req.method} ${req.url})`);
      calls.push(Date.now());
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model: string; stream?: boolean };
      const usage = { prompt_tokens: 5_000_000, completion_tokens: 9_000_000, total_tokens: 14_000_000 };
      if (body.stream) {
        // Streamed as OpenAI streams when asked (the adapter asks): the text, its end, the usage chunk, [DONE].
        const chunk = (choices: unknown[], usage: unknown = null) =>
          `data: ${JSON.stringify({ id: `chatcmpl-${calls.length}`, object: 'chat.completion.chunk', created: 1, model: body.model, choices, usage })}\n\n`;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk([{ index: 0, delta: { role: 'assistant', content: 'ok' }, finish_reason: null }]));
        res.write(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]));
        res.write(chunk([], usage));
        return res.end('data: [DONE]\n\n');
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: `chatcmpl-${calls.length}`,
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: body.model,
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok', refusal: null }, logprobs: null, finish_reason: 'stop' }],
          usage,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, calls };
}

t.test('a provider reporting more tokens than reserved is charged the reservation, and the carry is forgiven', async (t) => {
  const apiKey = 'sk-test-overcount-0123456789';
  const upstream = await overCountingUpstream(t, apiKey);
  const greedy = {
    ...textModel('acme/greedy', TOKEN_PRICE, ['basic']),
    deployments: [{ id: 'greedy-openai', provider: 'openai', target: { model: 'gpt-4o-mini' } }],
  };
  const file = catalogFile(t, { defaultPlan: 'basic', plans: [plan('basic')], models: [tokenModel, greedy] });
  const server: TestServer = await startTestServer(t, {
    env: { CATALOG_FILE: file.file, LOCAL_PROVIDER_LATENCY_MS: '0', OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: apiKey, ALLOW_PRIVATE_EGRESS: 'true' },
  });
  await server.recovered;
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const run = async (model: string, params: Record<string, unknown>) => {
    const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model, params });
    t.equal(created.status, 201, JSON.stringify(created.body));
    return { reserved: created.body.credits as number, done: await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'its end') };
  };
  const query = serverQuery(server);
  // A local job first, so that the account holds a carry the capped job then forgives.
  const small = await run('acme/tokens', { prompt: 'one two three', maxTokens: 5 });
  t.equal(small.done.status, 'succeeded');
  const carryOf = async () =>
    BigInt(
      (await query<{ token_carry_nano: string }>('select token_carry_nano from workspace_accounts where workspace_id = ?', [user.workspaceId]))[0]!
        .token_carry_nano,
    );
  t.ok((await carryOf()) > 0n, 'a carry is held');
  const capped = await run('acme/greedy', { prompt: 'count generously', maxTokens: 100 });
  t.equal(capped.done.status, 'succeeded', JSON.stringify([capped.done.errorCode, capped.done.errorMessage]));
  t.equal(upstream.calls.length, 1, 'one call upstream');
  t.ok(capped.reserved > 0, `the job reserved ${capped.reserved} credits`);
  t.equal(capped.done.credits, capped.reserved, 'it is charged its reservation, not the 5 + 9 million tokens reported');
  t.equal(await carryOf(), 0n, 'and the carry is forgiven');
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  t.same(ledger[capped.done.id], { reserve: 1, capture: 1 }, 'the whole reservation captured, nothing to release');
  await replay(t, query, user.workspaceId);
  await booksBalance(t, query, user.workspaceId);
});

t.test('kill -9 with token-priced jobs in flight: each settles once after the restart, balance equals ledger, the carry agrees', async (t) => {
  const { dataDir, postgres } = await durableStorage(t, 'gs-token-crash-');
  const file = catalogFile(t, { defaultPlan: 'basic', plans: [plan('basic', { concurrentJobs: 4 })], models: [tokenModel] });
  const serve = async () => {
    const child = startNode(t, 'test/fixtures/serve.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      DATABASE_URL: postgres?.url,
      CATALOG_FILE: file.file,
      LOCAL_PROVIDER_LATENCY_MS: '600',
      SHUTDOWN_TIMEOUT_MS: '30000',
      ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: `test:token-crash-${process.pid}-${Date.now()}:` } : {}),
    });
    const url = (await child.line(/^listening (http:\/\/\S+)$/, 120_000))[1]!;
    return { child, client: httpClient(url) as TestServer };
  };
  const first = await serve();
  const users = [await signUp(first.client), await signUp(first.client)];
  const keys = await Promise.all(users.map((u) => createKey(first.client, u.cookie, u.workspaceId, ['generations.write', 'generations.read'])));
  const ids: string[][] = [[], []];
  for (let n = 0; n < 10; n++) {
    for (const [w, user] of users.entries()) {
      const reply = await createGeneration(first.client, keys[w]!.key, user.workspaceId, {
        mode: 'text_to_text',
        model: 'acme/tokens',
        params: { prompt: `${'alpha beta '.repeat(1 + n)}job ${n}`, maxTokens: 10 + n * 11 },
      });
      t.equal(reply.status, 201);
      ids[w]!.push(reply.body.id);
    }
  }
  // Some finished, some with the provider, the rest queued: then kill -9.
  const atKill = await until(
    'jobs with the provider and jobs done in both workspaces',
    async () => {
      const states = await Promise.all(
        users.map((u, w) =>
          first.client.json<{ data: Array<{ status: string }> }>(`/v1/generations?workspaceId=${u.workspaceId}&limit=100`, {
            headers: { authorization: `Bearer ${keys[w]!.key}` },
          }),
        ),
      );
      const lists = states.map((s) => s.body.data.map((g) => g.status));
      // With the provider: reserved, submitted or running (a local job's submitted and running ride with its next write).
      const withProvider = (l: string[]) => l.some((s) => s === 'reserved' || s === 'submitted' || s === 'running');
      return lists.every((l) => withProvider(l) && l.includes('succeeded')) ? lists.flat() : undefined;
    },
    30_000,
    25,
  );
  const inFlight = atKill.filter((s) => !isTerminal({ status: s } as never)).length;
  t.ok(inFlight > 0, `${inFlight} of the 20 jobs unfinished when the process is killed (${atKill.filter((s) => s === 'running').length} running)`);
  first.child.proc.kill('SIGKILL');
  t.same(await first.child.exited, { code: null, signal: 'SIGKILL' });

  const second = await serve();
  for (const [w, user] of users.entries()) {
    for (const id of ids[w]!) await waitFor(second.client, keys[w]!.key, user.workspaceId, id, isTerminal, 'its end');
  }
  second.child.proc.kill('SIGTERM');
  await second.child.exited;

  const db = await openDatabase({ databaseUrl: postgres?.url, dataDir });
  try {
    const query: Query = <R>(sql: string, params: unknown[]) => db.em().execute<R[]>(sql, params);
    for (const user of users) {
      const statuses = await query<{ status: string; n: string }>(
        'select status, count(*)::int8 as n from generations where workspace_id = ? group by status',
        [user.workspaceId],
      );
      t.comment(`after the restart: ${statuses.map((s) => `${s.n} ${s.status}`).join(', ')}`);
      const books = await replay(t, query, user.workspaceId);
      t.ok(books.captured > 0, `${books.captured} of the 10 jobs captured`);
      t.equal(books.chargedNano + books.carryNano, books.exactNano, 'charged + carry = exact over the captured jobs');
      await booksBalance(t, query, user.workspaceId);
    }
  } finally {
    await db.close();
  }
});

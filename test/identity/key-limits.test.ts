import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { openDatabase } from '../../persistence/database.ts';
import { durableStorage } from '../helpers/database.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { signUp, withCookie, withKey } from '../helpers/identity.ts';
import { startNode } from '../fixtures/child.ts';
import { setPlan } from '../generations/support.ts';
import { cancelGeneration, createGeneration, httpClient, isTerminal, moneyOf, serverQuery, waitFor, type Client } from '../generations/flow.ts';
import { completeCheckout, MONEY_ENV } from '../money/support.ts';

/** Per-key spending controls (docs/auth-and-keys.md "Per-key spending controls"): set, changed, shown and enforced at creation. */

const MINI = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'hello' } };
const IMAGE = { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: 'x', numImages: 1 } };

async function newKey(server: Client, cookie: string, workspaceId: string, limits?: Record<string, unknown>) {
  const res = await server.json('/v1/api-keys', {
    method: 'POST',
    headers: withCookie(cookie),
    body: JSON.stringify({ workspaceId, name: 'limited', scopes: ['all'], ...(limits ? { limits } : {}) }),
  });
  if (res.status !== 201) throw new Error(`key creation: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.id as string, key: res.body.key as string, body: res.body };
}

function patchKey(server: Client, cookie: string, id: string, body: unknown) {
  return server.json(`/v1/api-keys/${id}`, { method: 'PATCH', headers: withCookie(cookie), body: JSON.stringify(body) });
}

async function usage(server: Client, cookie: string, id: string) {
  const res = await server.json(`/v1/api-keys/${id}/usage`, { headers: withCookie(cookie) });
  if (res.status !== 200) throw new Error(`usage: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.limits;
}

function tally(responses: Array<{ status: number }>): Record<number, number> {
  const byStatus: Record<number, number> = {};
  for (const r of responses) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
  return byStatus;
}

t.test("limits are set on create, shown in the key, changed and cleared by PATCH; bad values are 400; another workspace's key is 404", async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const plain = await newKey(server, owner.cookie, owner.workspaceId);
  t.same(
    plain.body.limits,
    { creditBudget: null, walletSpendCapCents: null, period: 'month', maxConcurrentGenerations: null, allowedModels: null },
    'no limits by default',
  );

  const limited = await newKey(server, owner.cookie, owner.workspaceId, {
    creditBudget: 50,
    walletSpendCapCents: 200,
    period: 'day',
    maxConcurrentGenerations: 3,
    allowedModels: ['local/text-mini', 'local/voice'],
  });
  const expected = {
    creditBudget: 50,
    walletSpendCapCents: 200,
    period: 'day',
    maxConcurrentGenerations: 3,
    allowedModels: ['local/text-mini', 'local/voice'],
  };
  t.same(limited.body.limits, expected);
  const list = await server.json(`/v1/api-keys?workspaceId=${owner.workspaceId}`, { headers: withCookie(owner.cookie) });
  t.same(list.body.data.find((k: { id: string }) => k.id === limited.id).limits, expected, 'the list shows them');

  const changed = await patchKey(server, owner.cookie, limited.id, { limits: { creditBudget: 10, period: 'month' } });
  t.equal(changed.status, 200);
  t.same(changed.body.limits, { ...expected, creditBudget: 10, period: 'month' }, 'fields left out keep their value');
  const cleared = await patchKey(server, owner.cookie, limited.id, {
    name: 'renamed',
    limits: { creditBudget: null, allowedModels: null, maxConcurrentGenerations: null },
  });
  t.equal(cleared.status, 200);
  t.equal(cleared.body.name, 'renamed');
  t.same(
    cleared.body.limits,
    { creditBudget: null, walletSpendCapCents: 200, period: 'month', maxConcurrentGenerations: null, allowedModels: null },
    'null clears',
  );
  const [row] = await server.services.db
    .em()
    .execute<Array<Record<string, unknown>>>(
      'select credit_budget, wallet_spend_cap_cents, budget_period, max_concurrent_generations, allowed_models from api_keys where id = ?',
      [limited.id],
    );
  t.same(
    row,
    { credit_budget: null, wallet_spend_cap_cents: 200, budget_period: 'month', max_concurrent_generations: null, allowed_models: null },
    'stored as shown',
  );

  const tooMany = Array.from({ length: 51 }, (_, i) => `m${i}`);
  const bad: Array<[string, Record<string, unknown>]> = [
    ['negative budget', { creditBudget: -1 }],
    ['fractional budget', { creditBudget: 1.5 }],
    ['negative wallet cap', { walletSpendCapCents: -5 }],
    ['unknown period', { period: 'week' }],
    ['null period', { period: null }],
    ['zero concurrency', { maxConcurrentGenerations: 0 }],
    ['unknown model id', { allowedModels: ['local/text-mini', 'nope/model'] }],
    ['empty allowlist', { allowedModels: [] }],
    ['too long allowlist', { allowedModels: tooMany }],
    ['duplicate models', { allowedModels: ['local/text-mini', 'local/text-mini'] }],
    ['unknown field', { budget: 5 }],
  ];
  for (const [what, limits] of bad) {
    const viaPatch = await patchKey(server, owner.cookie, limited.id, { limits });
    t.equal(viaPatch.status, 400, `PATCH: ${what}`);
    t.equal(viaPatch.body.error?.code, 'validation_error', `PATCH: ${what}`);
    t.match(viaPatch.body.error?.message, /limits/, `PATCH: ${what}: the message names the field`);
    const viaCreate = await server.json('/v1/api-keys', {
      method: 'POST',
      headers: withCookie(owner.cookie),
      body: JSON.stringify({ workspaceId: owner.workspaceId, name: 'x', scopes: ['all'], limits }),
    });
    t.equal(viaCreate.status, 400, `POST: ${what}`);
    t.equal(viaCreate.body.error?.code, 'validation_error', `POST: ${what}`);
  }
  const unknownModel = await patchKey(server, owner.cookie, limited.id, { limits: { allowedModels: ['local/text-mini', 'nope/model'] } });
  t.match(unknownModel.body.error.message, /allowedModels\.1: unknown model "nope\/model"/);
  t.same((await patchKey(server, owner.cookie, limited.id, { limits: {} })).body.limits.walletSpendCapCents, 200, 'nothing changed by the refusals');

  const stranger = await signUp(server);
  const foreign = await patchKey(server, stranger.cookie, limited.id, { limits: { creditBudget: 1000 } });
  t.equal(foreign.status, 404, "another workspace's key cannot be changed");
  t.equal(foreign.body.error.code, 'not_found');
  t.equal((await server.json(`/v1/api-keys/${limited.id}/usage`, { headers: withCookie(stranger.cookie) })).status, 404, 'nor its usage read');
  t.equal((await usage(server, owner.cookie, limited.id)).creditBudget.limit, null, 'the stranger changed nothing');
});

t.test("the model allowlist and the concurrency limit: 422 plan_limit_reached naming the key's limit, per item of a batch too", async (t) => {
  // Ten minutes of provider latency: accepted jobs stay unfinished for the whole test.
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '600000', RATE_LIMIT_PRO: '100000' } });
  const owner = await signUp(server);
  await setPlan(server, owner.workspaceId, 'pro');
  const { id, key } = await newKey(server, owner.cookie, owner.workspaceId, { allowedModels: ['local/text-mini'], maxConcurrentGenerations: 2 });

  const image = await createGeneration(server, key, owner.workspaceId, IMAGE);
  t.equal(image.status, 422);
  t.equal(image.body.error?.code, 'plan_limit_reached');
  t.match(image.body.error?.message, /API key may not use model local\/image-fast; it is limited to local\/text-mini/);

  const first = await createGeneration(server, key, owner.workspaceId, MINI);
  const second = await createGeneration(server, key, owner.workspaceId, MINI);
  t.same([first.status, second.status], [201, 201]);
  const third = await createGeneration(server, key, owner.workspaceId, MINI);
  t.equal(third.status, 422);
  t.equal(third.body.error?.code, 'plan_limit_reached');
  t.match(third.body.error?.message, /API key allows 2 unfinished generations at a time/);
  t.same((await usage(server, owner.cookie, id)).concurrentGenerations, { limit: 2, spent: 2, remaining: 0, resetsAt: null });

  const other = await newKey(server, owner.cookie, owner.workspaceId);
  t.equal((await createGeneration(server, other.key, owner.workspaceId, MINI)).status, 201, "another key of the workspace is not held by this key's limit");

  t.equal((await cancelGeneration(server, key, owner.workspaceId, first.body.id)).status, 200);
  t.equal((await createGeneration(server, key, owner.workspaceId, MINI)).status, 201, 'a finished job frees its place');

  const raised = await patchKey(server, owner.cookie, id, { limits: { maxConcurrentGenerations: 4 } });
  t.equal(raised.status, 200);
  const batch = await server.json('/v1/generations/batch', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({
      workspaceId: owner.workspaceId,
      items: [MINI, IMAGE, MINI, MINI, MINI].map(({ mode, model, params }) => ({ mode, model, params })),
    }),
  });
  t.equal(batch.status, 200);
  t.same(
    batch.body.results.map((r: { status: number }) => r.status),
    [201, 422, 201, 422, 422],
    'two places left: each item decided against the key as it stood after the one before',
  );
  t.match(batch.body.results[1].body.error.message, /may not use model local\/image-fast/);
  t.match(batch.body.results[3].body.error.message, /allows 4 unfinished generations/);

  t.equal((await patchKey(server, owner.cookie, id, { limits: { maxConcurrentGenerations: null, allowedModels: null } })).status, 200);
  t.equal((await createGeneration(server, key, owner.workspaceId, MINI)).status, 201, 'cleared: the concurrency limit is gone');
  t.equal((await createGeneration(server, key, owner.workspaceId, IMAGE)).status, 201, 'cleared: every model again');
  t.same(
    (await usage(server, owner.cookie, id)).concurrentGenerations,
    { limit: null, spent: 6, remaining: null, resetsAt: null },
    'unfinished jobs are counted without a limit too',
  );
});

t.test("the credit budget: 402 naming it and its reset, given back on cancel, reset at the period's start, shown in usage", async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 5, 10, 22, 0, 0));
  const server = await startTestServer(t, {
    clock,
    env: { LOCAL_PROVIDER_LATENCY_MS: '600000', QUEUE_TIMEOUT_MS: String(7 * 86_400_000), RATE_LIMIT_PRO: '100000' },
  });
  const owner = await signUp(server);
  await setPlan(server, owner.workspaceId, 'pro');
  const { id, key } = await newKey(server, owner.cookie, owner.workspaceId, { creditBudget: 5, period: 'day' });

  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const created = await createGeneration(server, key, owner.workspaceId, MINI);
    t.equal(created.status, 201);
    ids.push(created.body.id);
  }
  const refused = await createGeneration(server, key, owner.workspaceId, MINI);
  t.equal(refused.status, 402);
  t.equal(refused.body.error?.code, 'insufficient_credits');
  t.equal(refused.body.error?.message, "This API key's daily credit budget of 5 is spent; it resets at 2026-06-11T00:00:00.000Z.");
  const image = await createGeneration(server, key, owner.workspaceId, IMAGE);
  t.equal(image.status, 402, 'a dearer job is refused as well');
  t.same((await usage(server, owner.cookie, id)).creditBudget, { limit: 5, spent: 5, remaining: 0, resetsAt: '2026-06-11T00:00:00.000Z' });

  t.equal((await cancelGeneration(server, key, owner.workspaceId, ids[4]!)).status, 200);
  t.same(
    (await usage(server, owner.cookie, id)).creditBudget,
    { limit: 5, spent: 4, remaining: 1, resetsAt: '2026-06-11T00:00:00.000Z' },
    'the cancelled job gave its credit back',
  );
  t.equal((await createGeneration(server, key, owner.workspaceId, MINI)).status, 201, 'and it can be spent again');
  t.equal((await createGeneration(server, key, owner.workspaceId, MINI)).status, 402);

  const [spendRows] = await serverQuery(server)<{ credits: string }>(
    `select credits from api_key_spend where key_id = ? and period = 'day' and period_start = '2026-06-10'`,
    [id],
  );
  t.equal(Number(spendRows!.credits), 5, "the day's row holds what the key spent, released job excluded");

  clock.advance(3 * 3_600_000);
  t.same(
    (await usage(server, owner.cookie, id)).creditBudget,
    { limit: 5, spent: 0, remaining: 5, resetsAt: '2026-06-12T00:00:00.000Z' },
    'a new UTC day starts from zero',
  );
  for (let i = 0; i < 3; i++) t.equal((await createGeneration(server, key, owner.workspaceId, MINI)).status, 201, "the new day's budget");

  const monthly = await patchKey(server, owner.cookie, id, { limits: { period: 'month', creditBudget: 8 } });
  t.equal(monthly.status, 200);
  t.same(
    (await usage(server, owner.cookie, id)).creditBudget,
    { limit: 8, spent: 8, remaining: 0, resetsAt: '2026-07-01T00:00:00.000Z' },
    'the month counts both days',
  );
  const monthRefusal = await createGeneration(server, key, owner.workspaceId, MINI);
  t.equal(monthRefusal.status, 402);
  t.equal(monthRefusal.body.error?.message, "This API key's monthly credit budget of 8 is spent; it resets at 2026-07-01T00:00:00.000Z.");
  t.equal((await patchKey(server, owner.cookie, id, { limits: { creditBudget: 10 } })).status, 200);
  const partly = await createGeneration(server, key, owner.workspaceId, IMAGE);
  t.equal(partly.status, 402, 'a job dearer than what is left');
  t.match(partly.body.error?.message, /This job costs 4 credits; this API key's monthly credit budget of 10 has 2 left/);
  t.equal((await createGeneration(server, key, owner.workspaceId, MINI)).status, 201);
  t.equal((await patchKey(server, owner.cookie, id, { limits: { creditBudget: null } })).status, 200);
  t.equal((await createGeneration(server, key, owner.workspaceId, IMAGE)).status, 201, 'no budget: no refusal');
  t.same(
    (await usage(server, owner.cookie, id)).creditBudget,
    { limit: null, spent: 13, remaining: null, resetsAt: '2026-07-01T00:00:00.000Z' },
    'spent is counted without a budget',
  );
});

t.test('failed jobs give the budget back', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0', LOCAL_PROVIDER_FAILURE_PERCENT: '100' } });
  const owner = await signUp(server);
  const { id, key } = await newKey(server, owner.cookie, owner.workspaceId, { creditBudget: 2 });
  for (let round = 0; round < 2; round++) {
    const created = [await createGeneration(server, key, owner.workspaceId, MINI), await createGeneration(server, key, owner.workspaceId, MINI)];
    t.same(
      created.map((c) => c.status),
      [201, 201],
      `round ${round}: the whole budget`,
    );
    for (const c of created) t.equal((await waitFor(server, key, owner.workspaceId, c.body.id, isTerminal, 'failed')).status, 'failed');
    t.same((await usage(server, owner.cookie, id)).creditBudget.spent, 0, `round ${round}: both failed, nothing spent`);
  }
});

t.test("the wallet spend cap: 402 wallet_insufficient_balance naming the key's cap", async (t) => {
  const server = await startTestServer(t, { env: MONEY_ENV });
  const owner = await signUp(server);
  const order = await server.json('/v1/wallet/top-ups', {
    method: 'POST',
    headers: withCookie(owner.cookie),
    body: JSON.stringify({ workspaceId: owner.workspaceId, amountCents: 1000 }),
  });
  t.equal(order.status, 201);
  await completeCheckout(order.body.checkoutUrl, 'pay');
  // The free plan's credit costs 5 cents from the wallet: three jobs fit a cap of 15 cents.
  const { id, key } = await newKey(server, owner.cookie, owner.workspaceId, { walletSpendCapCents: 15 });
  const wallet = { ...MINI, paymentMode: 'wallet' };
  for (let i = 0; i < 3; i++) t.equal((await createGeneration(server, key, owner.workspaceId, wallet)).status, 201, `wallet job ${i}`);
  const refused = await createGeneration(server, key, owner.workspaceId, wallet);
  t.equal(refused.status, 402);
  t.equal(refused.body.error?.code, 'wallet_insufficient_balance');
  t.match(refused.body.error?.message, /this API key's monthly wallet spend cap of 15 cents leaves 0; it resets at /);
  t.equal((await createGeneration(server, key, owner.workspaceId, MINI)).status, 201, 'credits are not held by the wallet cap');
  const figures = await usage(server, owner.cookie, id);
  t.match(figures.walletSpendCapCents, { limit: 15, spent: 15, remaining: 0 });
  t.equal(figures.creditBudget.spent, 4, 'the credit figure counts every job, however paid');
});

t.test('exact under concurrency: 200 concurrent creates, and two concurrent batches of 100, against key budgets of 50 credits', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_TEAM: '1000000' } });
  const owner = await signUp(server);
  // The team plan holds 500 unfinished jobs and 12,000 credits: only the key's budget binds.
  await setPlan(server, owner.workspaceId, 'team');
  const single = await newKey(server, owner.cookie, owner.workspaceId, { creditBudget: 50 });

  const responses = await Promise.all(
    Array.from({ length: 200 }, (_, i) => createGeneration(server, single.key, owner.workspaceId, { ...MINI, params: { prompt: `job ${i}` } })),
  );
  t.same(tally(responses), { 201: 50, 402: 150 }, 'exactly what fits');
  t.ok(
    responses.filter((r) => r.status === 402).every((r) => r.body.error?.code === 'insufficient_credits' && /credit budget of 50/.test(r.body.error.message)),
    "each refusal names the key's budget",
  );

  const batched = await newKey(server, owner.cookie, owner.workspaceId, { creditBudget: 50 });
  const batches = await Promise.all(
    [0, 1].map((b) =>
      server.json('/v1/generations/batch', {
        method: 'POST',
        headers: withKey(batched.key),
        body: JSON.stringify({
          workspaceId: owner.workspaceId,
          items: Array.from({ length: 100 }, (_, i) => ({ ...MINI, params: { prompt: `batch ${b} item ${i}` } })),
        }),
      }),
    ),
  );
  t.same(
    batches.map((b) => b.status),
    [200, 200],
  );
  t.equal(
    batches.reduce((sum, b) => sum + b.body.created, 0),
    50,
    "the batches' items together take exactly the budget",
  );
  t.ok(
    batches
      .flatMap((b) => b.body.results)
      .filter((r: { status: number }) => r.status !== 201)
      .every((r: { status: number; body: any }) => r.status === 402 && r.body.error.code === 'insufficient_credits'),
  );

  const query = serverQuery(server);
  for (const k of [single, batched]) {
    const [ledger] = await query<{ reserves: string; credits: string }>(
      `select count(*)::int8 as reserves, coalesce(-sum(l.credits), 0)::int8 as credits from credit_ledger l join generations g on g.id = l.generation_id
        where l.workspace_id = ? and l.kind = 'reserve' and g.api_key_id = ?`,
      [owner.workspaceId, k.id],
    );
    t.same(
      { reserves: Number(ledger!.reserves), credits: Number(ledger!.credits) },
      { reserves: 50, credits: 50 },
      'the ledger holds 50 reservations of the key, 50 credits',
    );
    const [generations] = await query<{ n: string }>('select count(*)::int8 as n from generations where api_key_id = ?', [k.id]);
    t.equal(Number(generations!.n), 50, 'refused creates made no generation');
    const [month] = await query<{ credits: string }>(`select credits from api_key_spend where key_id = ? and period = 'month'`, [k.id]);
    t.equal(Number(month!.credits), 50, "the key's spend row agrees");
  }
  const money = await moneyOf(query, owner.workspaceId);
  const [reserves] = await query<{ n: string }>(`select count(*)::int8 as n from credit_ledger where workspace_id = ? and kind = 'reserve'`, [
    owner.workspaceId,
  ]);
  t.equal(Number(reserves!.n), 100, 'the workspace reserved for the 100 accepted jobs only');
  t.equal(money.available, money.ledgerAvailable, 'balance and ledger agree');
});

t.test('a restart keeps the spent figures (kill -9, then the same data)', async (t) => {
  const { dataDir, postgres } = await durableStorage(t, 'gs-key-limits-');
  const serve = async () => {
    const child = startNode(t, 'test/fixtures/serve.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      DATABASE_URL: postgres?.url,
      LOCAL_PROVIDER_LATENCY_MS: '600000',
      SHUTDOWN_TIMEOUT_MS: '30000',
    });
    const url = (await child.line(/^listening (http:\/\/\S+)$/, 90_000))[1]!;
    return { child, client: httpClient(url) };
  };
  const first = await serve();
  const user = await signUp(first.client as TestServer);
  const { id, key } = await newKey(first.client, user.cookie, user.workspaceId, { creditBudget: 6, maxConcurrentGenerations: 4 });
  // Two that will still be unfinished at the kill, one cancelled (given back), one more unfinished.
  const a = await createGeneration(first.client, key, user.workspaceId, IMAGE);
  const b = await createGeneration(first.client, key, user.workspaceId, MINI);
  t.same([a.status, b.status], [201, 201]);
  t.equal((await cancelGeneration(first.client, key, user.workspaceId, b.body.id)).status, 200);
  t.equal((await createGeneration(first.client, key, user.workspaceId, MINI)).status, 201);
  const before = await usage(first.client, user.cookie, id);
  t.same([before.creditBudget.spent, before.concurrentGenerations.spent], [5, 2]);

  first.child.proc.kill('SIGKILL');
  await first.child.exited;
  const db = await openDatabase({ databaseUrl: postgres?.url, dataDir });
  const rows = await db
    .em()
    .execute<Array<{ period: string; credits: string }>>(
      'select period, sum(credits)::int8 as credits from api_key_spend where key_id = ? group by period order by period',
      [id],
    );
  await db.close();
  t.same(
    rows.map((r) => [r.period, Number(r.credits)]),
    [
      ['day', 5],
      ['month', 5],
    ],
    'the spend was committed with the reservations',
  );

  const second = await serve();
  const after = await usage(second.client, user.cookie, id);
  t.same(after, before, 'the same figures after the restart');
  t.equal((await createGeneration(second.client, key, user.workspaceId, MINI)).status, 201, 'one credit left');
  const refused = await createGeneration(second.client, key, user.workspaceId, MINI);
  t.equal(refused.status, 402, 'the budget is spent across the restart');
  t.match(refused.body.error?.message, /monthly credit budget of 6 is spent/);
  t.equal((await patchKey(second.client, user.cookie, id, { limits: { creditBudget: 100 } })).status, 200);
  t.equal((await createGeneration(second.client, key, user.workspaceId, MINI)).status, 201, 'a larger budget');
  const crowded = await createGeneration(second.client, key, user.workspaceId, MINI);
  t.equal(crowded.status, 422, 'the unfinished jobs from before the restart still hold their places');
  t.match(crowded.body.error?.message, /allows 4 unfinished generations at a time, and has 4/);
  second.child.proc.kill('SIGKILL');
  await second.child.exited;
});

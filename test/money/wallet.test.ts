import t from 'tap';
import { sharedTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { checkBooks, completeCheckout, get, MONEY_ENV, post } from './support.ts';
import { eventually } from '../helpers/eventually.ts';

const voice = (seconds: number, paymentMode: string) => ({
  mode: 'text_to_audio',
  model: 'local/voice',
  params: { prompt: 'hello', durationSeconds: seconds, format: 'wav' },
  paymentMode,
});

async function generate(server: TestServer, key: string, workspaceId: string, body: Record<string, unknown>) {
  return post(server, '/v1/generations', key, { workspaceId, ...body });
}

const settled = (server: TestServer, key: string, workspaceId: string) =>
  eventually(
    async () => {
      const list = await get(server, `/v1/generations?workspaceId=${workspaceId}&limit=100`, key);
      return list.body.data.every((g: { status: string }) => ['succeeded', 'failed', 'cancelled', 'expired'].includes(g.status)) && list.body.data;
    },
    { timeoutMs: 30_000, everyMs: 25, what: 'the generations finishing' },
  );

async function deposit(server: TestServer, credential: string, workspaceId: string, amountCents: number) {
  const order = await post(server, '/v1/wallet/top-ups', credential, { workspaceId, amountCents });
  if (order.status !== 201) throw new Error(`deposit: ${order.status} ${JSON.stringify(order.body)}`);
  await completeCheckout(order.body.checkoutUrl, 'pay');
  return order.body;
}

t.test('each paymentMode with each refusal, the wallet activated by a first 10-dollar deposit, and usage that adds up', async (t) => {
  const server = await sharedTestServer(MONEY_ENV);
  const owner = await signUp(server);
  const { key, id: keyId } = await createKey(server, owner.cookie, owner.workspaceId, ['all']);
  const ws = owner.workspaceId;

  const pending = await generate(server, key, ws, voice(3, 'wallet'));
  t.match(pending, { status: 422, body: { error: { code: 'wallet_pending_minimum' } } }, 'wallet before a first deposit');

  for (let i = 0; i < 3; i++) t.equal((await generate(server, key, ws, voice(30, 'credits'))).status, 201, 'credits mode');
  t.match(
    await generate(server, key, ws, voice(30, 'credits')),
    { status: 402, body: { error: { code: 'insufficient_credits' } } },
    '10 credits left, 30 asked',
  );
  t.match(
    await generate(server, key, ws, voice(30, 'auto')),
    { status: 402, body: { error: { code: 'insufficient_credits' } } },
    'auto without an active wallet',
  );

  const tooSmall = await post(server, '/v1/wallet/top-ups', key, { workspaceId: ws, amountCents: 999 });
  t.match(tooSmall, { status: 400, body: { error: { code: 'validation_error' } } }, 'below 10 dollars');
  t.match(tooSmall.body.error.message, /minimum deposit is 1000 cents/);
  const unpaid = await post(server, '/v1/wallet/top-ups', key, { workspaceId: ws, amountCents: 1000 });
  t.match(unpaid, { status: 201, body: { id: /^dep_/, status: 'pending', source: 'checkout', amountCents: 1000 } });
  t.match(
    await generate(server, key, ws, voice(3, 'wallet')),
    { status: 422, body: { error: { code: 'wallet_pending_minimum' } } },
    'a pending deposit does not activate the wallet',
  );
  await completeCheckout(unpaid.body.checkoutUrl, 'pay');

  const wallet = await get(server, `/v1/wallet?workspaceId=${ws}`, key);
  t.match(wallet.body, { balanceCents: 1000, reservedCents: 0, activated: true, minimumDepositCents: 1000, centsPerCredit: 5, currency: 'usd' });

  for (let i = 0; i < 6; i++) t.equal((await generate(server, key, ws, voice(30, 'wallet'))).status, 201, `wallet job ${i + 1}: 150 cents`);
  t.match(
    await generate(server, key, ws, voice(30, 'wallet')),
    { status: 402, body: { error: { code: 'wallet_insufficient_balance' } } },
    '100 cents left, 150 asked',
  );
  const auto = await generate(server, key, ws, voice(30, 'auto'));
  t.equal(auto.status, 201, 'auto: 10 credits, then 20 credits (100 cents) from the wallet');

  const jobs = await settled(server, key, ws);
  t.equal(jobs.length, 10);
  t.ok(jobs.every((g: { status: string }) => g.status === 'succeeded'));
  const after = await get(server, `/v1/wallet?workspaceId=${ws}`, key);
  t.match(after.body, { balanceCents: 0, reservedCents: 0, monthlySpend: { spentCents: 1000 } });
  const credits = await get(server, `/v1/workspaces/${ws}/credits`, key);
  t.match(credits.body, { availableCredits: 0, reservedCredits: 0 });
  t.match(
    await generate(server, key, ws, voice(3, 'auto')),
    { status: 402, body: { error: { code: 'wallet_insufficient_balance' } } },
    'auto with an active but empty wallet',
  );
  t.match(await generate(server, key, ws, voice(3, 'credits')), { status: 402, body: { error: { code: 'insufficient_credits' } } });

  const transactions = await get(server, `/v1/wallet/transactions?workspaceId=${ws}&limit=100`, key);
  t.equal(transactions.status, 200);
  const kinds = transactions.body.data.map((e: { kind: string }) => e.kind);
  t.equal(kinds.filter((k: string) => k === 'deposit').length, 1);
  t.equal(kinds.filter((k: string) => k === 'capture').length, 7, 'six wallet jobs and the auto one captured');
  t.ok(
    transactions.body.data.every((e: { walletCents: number; reservedWalletCents: number }) => e.walletCents !== 0 || e.reservedWalletCents !== 0),
    'only wallet movements',
  );
  const deposits = await get(server, `/v1/wallet/deposits?workspaceId=${ws}`, key);
  t.match(deposits.body.data, [{ id: unpaid.body.id, status: 'paid', source: 'checkout', amountCents: 1000 }]);

  const usage = await get(server, `/v1/usage?workspaceId=${ws}`, key);
  t.equal(usage.status, 200, JSON.stringify(usage.body));
  t.match(usage.body, { apiKeyId: keyId, generations: { total: 10, succeeded: 10, unfinished: 0 }, credits: 300, creditsFromBalance: 100, costCents: 1000 });
  t.ok(usage.body.outputBytes > 0, 'output bytes counted');
  const [assets] = await server.services.db
    .em()
    .execute<Array<{ bytes: string }>>('select coalesce(sum(bytes), 0)::int8 as bytes from assets where workspace_id = ?', [ws]);
  t.equal(usage.body.outputBytes, Number(assets!.bytes), "output bytes are the outputs' sizes");
  const books = await checkBooks(server, ws);
  t.same(books.balances, books.sums, 'balances equal the ledger');
  t.equal(100 - books.balances.available_credits!, usage.body.creditsFromBalance, 'usage agrees with the credit balance');
  t.equal(1000 - books.balances.wallet_cents!, usage.body.costCents, 'and with the wallet');

  const session = await get(server, `/v1/usage?workspaceId=${ws}`, owner.cookie);
  t.match(session.body, { apiKeyId: null, generations: { total: 10 } }, 'signed in: the whole workspace');
  const otherKey = await createKey(server, owner.cookie, ws, ['usage.read']);
  const byOther = await get(server, `/v1/usage?workspaceId=${ws}`, otherKey.key);
  t.match(byOther.body, { apiKeyId: otherKey.id, generations: { total: 0 }, credits: 0, costCents: 0 }, 'another key made none of them');
  t.match(await get(server, `/v1/usage?workspaceId=${ws}&apiKeyId=${keyId}`, otherKey.key), { status: 403 }, 'a key reads only its own usage');
  const filtered = await get(server, `/v1/usage?workspaceId=${ws}&apiKeyId=${keyId}`, owner.cookie);
  t.match(filtered.body, { apiKeyId: keyId, generations: { total: 10 } });
  const past = await get(server, `/v1/usage?workspaceId=${ws}&from=2020-01-01&to=2020-01-31`, owner.cookie);
  t.match(past.body, { generations: { total: 0 }, credits: 0, from: '2020-01-01T00:00:00.000Z', to: '2020-02-01T00:00:00.000Z' });
  t.match(await get(server, `/v1/usage?workspaceId=${ws}&from=2020-02-01&to=2020-01-01`, owner.cookie), { status: 400 });
});

t.test('wallet settings: the monthly spend cap refuses, auto-recharge deposits from the saved card', async (t) => {
  const server = await sharedTestServer(MONEY_ENV);
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const writer = await createKey(server, owner.cookie, ws, ['wallet.write', 'generations.write', 'generations.read']);
  const walletRead = await createKey(server, owner.cookie, ws, ['wallet.read']);
  const usageRead = await createKey(server, owner.cookie, ws, ['usage.read']);
  const generationsRead = await createKey(server, owner.cookie, ws, ['generations.read']);

  await deposit(server, owner.cookie, ws, 1000);
  const defaults = await get(server, `/v1/wallet?workspaceId=${ws}`, walletRead.key);
  t.match(defaults.body.settings, { autoRecharge: { enabled: false, thresholdCents: 0, amountCents: 0 }, monthlySpendCapCents: null });
  t.equal((await get(server, `/v1/wallet?workspaceId=${ws}`, usageRead.key)).status, 200, 'usage.read reads the wallet');
  t.equal((await get(server, `/v1/wallet/transactions?workspaceId=${ws}`, usageRead.key)).status, 200);
  t.equal((await get(server, `/v1/wallet/deposits?workspaceId=${ws}`, walletRead.key)).status, 200);
  t.match(await get(server, `/v1/wallet?workspaceId=${ws}`, generationsRead.key), { status: 403, body: { error: { code: 'forbidden' } } });
  t.match(
    await post(server, '/v1/wallet', walletRead.key, { workspaceId: ws, monthlySpendCapCents: 100 }, 'PATCH'),
    { status: 403 },
    'wallet.read cannot write',
  );
  t.match(await post(server, '/v1/wallet/top-ups', usageRead.key, { workspaceId: ws, amountCents: 1000 }), { status: 403 });

  const capped = await post(server, '/v1/wallet', writer.key, { workspaceId: ws, monthlySpendCapCents: 200 }, 'PATCH');
  t.match(capped, { status: 200, body: { settings: { monthlySpendCapCents: 200 } } });
  t.equal((await generate(server, writer.key, ws, voice(30, 'wallet'))).status, 201, '150 of 200');
  const refused = await generate(server, writer.key, ws, voice(30, 'wallet'));
  t.match(refused, { status: 402, body: { error: { code: 'wallet_insufficient_balance' } } }, '300 would pass the cap');
  t.match(refused.body.error.message, /monthly spend cap/);
  t.equal((await generate(server, writer.key, ws, voice(10, 'wallet'))).status, 201, '50 more reaches it exactly');
  await settled(server, writer.key, ws);
  t.match((await get(server, `/v1/wallet?workspaceId=${ws}`, walletRead.key)).body, { balanceCents: 800, monthlySpend: { spentCents: 200 } });
  t.match(
    (await post(server, '/v1/wallet', writer.key, { workspaceId: ws, monthlySpendCapCents: null }, 'PATCH')).body.settings,
    { monthlySpendCapCents: null },
    'cap removed',
  );

  t.match(
    await post(server, '/v1/wallet', writer.key, { workspaceId: ws, autoRecharge: { enabled: true, thresholdCents: 500, amountCents: 999 } }, 'PATCH'),
    { status: 400, body: { error: { code: 'validation_error' } } },
    'a recharge below the minimum deposit',
  );
  const enabled = await post(
    server,
    '/v1/wallet',
    writer.key,
    { workspaceId: ws, autoRecharge: { enabled: true, thresholdCents: 1000, amountCents: 1500 } },
    'PATCH',
  );
  t.match(enabled, { status: 200, body: { settings: { autoRecharge: { enabled: true, thresholdCents: 1000, amountCents: 1500 } } } });
  const wallet =
    enabled.body.balanceCents === 2300
      ? enabled.body
      : await eventually(
          async () => {
            const now = (await get(server, `/v1/wallet?workspaceId=${ws}`, walletRead.key)).body;
            return now.balanceCents === 2300 && now;
          },
          { timeoutMs: 10_000, everyMs: 10, what: 'the automatic recharge' },
        );
  t.equal(wallet.balanceCents, 2300, '800 under the 1000 threshold: 1500 deposited automatically');
  const deposits = await get(server, `/v1/wallet/deposits?workspaceId=${ws}`, walletRead.key);
  t.match(deposits.body.data, [
    { source: 'auto_recharge', status: 'paid', amountCents: 1500 },
    { source: 'checkout', status: 'paid', amountCents: 1000 },
  ]);
  t.equal((await generate(server, writer.key, ws, voice(30, 'wallet'))).status, 201, '2300 - 150: above the threshold, no recharge');
  await settled(server, writer.key, ws);
  t.equal((await get(server, `/v1/wallet/deposits?workspaceId=${ws}`, walletRead.key)).body.data.length, 2);
  const books = await checkBooks(server, ws);
  t.same(books.balances, books.sums);
  t.equal(books.balances.wallet_cents, 2150);
});

t.test('wallet: refusals and tenant isolation', async (t) => {
  const server = await sharedTestServer(MONEY_ENV);
  const a = await signUp(server);
  const b = await signUp(server);
  const keyB = await createKey(server, b.cookie, b.workspaceId, ['all']);
  t.match(await get(server, `/v1/wallet?workspaceId=${a.workspaceId}`, keyB.key), { status: 403 }, 'a key of B naming A');
  t.match(await get(server, `/v1/wallet?workspaceId=${a.workspaceId}`, b.cookie), { status: 404 }, "B signed in, A's wallet");
  t.match(await post(server, '/v1/wallet/top-ups', b.cookie, { workspaceId: a.workspaceId, amountCents: 1000 }), { status: 404 });
  t.match(await post(server, '/v1/wallet', b.cookie, { workspaceId: a.workspaceId, monthlySpendCapCents: 0 }, 'PATCH'), { status: 404 });
  t.match(await get(server, `/v1/wallet/deposits?workspaceId=${a.workspaceId}`, b.cookie), { status: 404 });
  t.match(await get(server, `/v1/wallet/transactions?workspaceId=${a.workspaceId}`, b.cookie), { status: 404 });
  t.match(await get(server, `/v1/usage?workspaceId=${a.workspaceId}`, b.cookie), { status: 404 });
  t.match(await post(server, '/v1/wallet/top-ups', a.cookie, { workspaceId: a.workspaceId, amountCents: 10.5 }), { status: 400 });
  t.match(await post(server, '/v1/wallet', a.cookie, { workspaceId: a.workspaceId, monthlySpendCapCents: -1 }, 'PATCH'), { status: 400 });
  await deposit(server, a.cookie, a.workspaceId, 5000);
  t.equal((await get(server, `/v1/wallet?workspaceId=${b.workspaceId}`, keyB.key)).body.balanceCents, 0, "B's wallet is its own");
  t.same((await get(server, `/v1/wallet/deposits?workspaceId=${b.workspaceId}`, keyB.key)).body.data, []);
});

import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { durableStorage } from '../helpers/database.ts';
import { eventually } from '../helpers/eventually.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { checkBooks, completeCheckout, get, MONEY_ENV, post, sendEvent, signedEvent } from './support.ts';

const DAY = 86_400_000;
const ENV = { ...MONEY_ENV, SESSION_TTL_HOURS: '8760' };

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  let value = await read();
  await eventually(async () => done((value = await read())), { timeoutMs: 10_000 }).catch(() => {});
  return value;
}

const credits = async (server: TestServer, cookie: string, ws: string) =>
  (await get(server, `/v1/workspaces/${ws}/credits`, cookie)).body.availableCredits as number;

t.test('subscription: checkout paid, credits granted once per period, renewal by the clock, cancel at period end', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 0, 10, 12));
  const server = await startTestServer(t, { env: ENV, clock });
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const key = await createKey(server, owner.cookie, ws, ['usage.read']);
  const rateLimit = async () =>
    (await server.fetch(`/v1/workspaces/${ws}/credits`, { headers: { authorization: `Bearer ${key.key}` } })).headers.get('x-ratelimit-limit');

  const none = await get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie);
  t.match(none.body, {
    plan: 'free',
    status: 'none',
    subscription: null,
    entitlements: { id: 'free', monthlyCredits: 100, requestsPerMinute: 60, concurrentJobs: 2 },
  });
  t.ok(none.body.entitlements.models.includes('local/text-mini'));
  t.notOk(none.body.entitlements.models.includes('local/text-pro'), 'free plan models only');
  t.equal(await rateLimit(), '60');

  t.match(await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'free' }), {
    status: 400,
    body: { error: { code: 'validation_error' } },
  });
  t.match(await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'gold' }), { status: 400 });
  t.match(await post(server, '/v1/billing/checkout', key.key, { workspaceId: ws, plan: 'pro' }), { status: 403 }, 'a key without wallet.write');
  t.match(
    await post(server, '/v1/billing/cancel', owner.cookie, { workspaceId: ws }),
    { status: 409, body: { error: { code: 'conflict' } } },
    'nothing to cancel',
  );

  const checkout = await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'pro' });
  t.match(checkout, { status: 201, body: { paymentId: /^pay_/, subscriptionId: /^sub_/, plan: 'pro', amountCents: 2900, status: 'pending' } });
  t.equal(await credits(server, owner.cookie, ws), 100, 'nothing before payment');
  await completeCheckout(checkout.body.checkoutUrl, 'pay');

  const active = await get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie);
  t.match(active.body, {
    plan: 'pro',
    status: 'active',
    subscription: {
      id: checkout.body.subscriptionId,
      plan: 'pro',
      status: 'active',
      cancelAtPeriodEnd: false,
      currentPeriodStart: '2026-01-10T12:00:00.000Z',
      currentPeriodEnd: '2026-02-10T12:00:00.000Z',
    },
    entitlements: { id: 'pro', monthlyCredits: 3000, requestsPerMinute: 600, concurrentJobs: 10 },
  });
  t.ok(active.body.entitlements.models.includes('local/text-pro'));
  t.equal(await credits(server, owner.cookie, ws), 3100, "the first period's 3000 credits");
  t.equal(await rateLimit(), '600', "the keys of the workspace get the new plan's rate limit at once");

  const dup = await sendEvent(server, signedEvent(checkout.body.paymentId, 'payment.succeeded', { at: clock.now() }));
  t.same(dup.body, { received: true, applied: false }, 'a second success event for the checkout changes nothing');
  t.match(await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'pro' }), { status: 409 }, 'already on pro');

  clock.advance(31 * DAY);
  const renewed = await until(
    () => credits(server, owner.cookie, ws),
    (n) => n === 6100,
  );
  t.equal(renewed, 6100, 'renewed at the period end: 3000 more');
  const period2 = await get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie);
  t.match(period2.body.subscription, { currentPeriodStart: '2026-02-10T12:00:00.000Z', currentPeriodEnd: '2026-03-10T12:00:00.000Z', status: 'active' });
  const payments = await get(server, `/v1/billing/payments?workspaceId=${ws}`, owner.cookie);
  t.match(payments.body.data, [
    { purpose: 'subscription', orderId: checkout.body.subscriptionId, amountCents: 2900, status: 'succeeded', plan: 'pro' },
    { id: checkout.body.paymentId, purpose: 'subscription', status: 'succeeded' },
  ]);

  const portal = await post(server, '/v1/billing/portal', owner.cookie, { workspaceId: ws });
  t.match(portal, { status: 200, body: { url: new RegExp(`^${server.url}/v1/billing/local/portal\\?`), expiresAt: /Z$/ } });
  const portalPage = await fetch(portal.body.url);
  t.equal(portalPage.status, 200);
  t.equal(portalPage.headers.get('content-type'), 'text/html; charset=utf-8');
  t.match(await portalPage.text(), /Plan <strong>pro<\/strong>, renews on 2026-03-10/);
  const forged = portal.body.url.replace(ws, 'ws_someoneelse');
  t.equal((await fetch(forged)).status, 404, 'a portal URL is for one workspace');

  const canceled = await post(server, '/v1/billing/cancel', owner.cookie, { workspaceId: ws });
  t.match(canceled, { status: 200, body: { cancelAtPeriodEnd: true, status: 'active', currentPeriodEnd: '2026-03-10T12:00:00.000Z' } });
  t.equal((await post(server, '/v1/billing/cancel', owner.cookie, { workspaceId: ws })).status, 200, 'cancelling twice is the same');
  t.match((await get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie)).body, { plan: 'pro', status: 'canceling' });

  clock.advance(28 * DAY);
  const ended = await until(
    () => get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie),
    (r) => r.body.plan === 'free',
  );
  t.match(ended.body, { plan: 'free', status: 'none', subscription: null, entitlements: { id: 'free' } }, 'ended at the period end');
  t.equal(await credits(server, owner.cookie, ws), 6100, 'no renewal after cancelling; granted credits stay');
  t.equal(await rateLimit(), '60');
  t.equal((await fetch(portal.body.url)).status, 404, 'the portal session expired');
  const books = await checkBooks(server, ws);
  t.same(books.balances, books.sums);
  const grants = await server.services.db
    .em()
    .execute<Array<{ reference: string }>>(`select reference from credit_ledger where workspace_id = ? and kind = 'grant' order by created_at`, [ws]);
  t.same(
    grants.map((g) => g.reference),
    [
      'plan:free:opening',
      `sub:${checkout.body.subscriptionId}:period:2026-01-10T12:00:00.000Z`,
      `sub:${checkout.body.subscriptionId}:period:2026-02-10T12:00:00.000Z`,
    ],
  );
});

t.test('switching plans: the new subscription replaces the old at once, and only it renews', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 2, 1));
  const server = await startTestServer(t, { env: ENV, clock });
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const pro = await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'pro' });
  await completeCheckout(pro.body.checkoutUrl, 'pay');
  clock.advance(5 * DAY);
  const team = await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'team' });
  t.equal(team.status, 201);
  await completeCheckout(team.body.checkoutUrl, 'pay');
  const now = await get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie);
  t.match(now.body, {
    plan: 'team',
    subscription: { id: team.body.subscriptionId, currentPeriodStart: '2026-03-06T00:00:00.000Z', currentPeriodEnd: '2026-04-06T00:00:00.000Z' },
  });
  t.equal(await credits(server, owner.cookie, ws), 100 + 3000 + 12000);
  const [old] = await server.services.db.em().execute<Array<{ status: string }>>('select status from subscriptions where id = ?', [pro.body.subscriptionId]);
  t.equal(old!.status, 'replaced');

  clock.advance(28 * DAY); // past the old pro period end (April 1), before the team one (April 6)
  // The old subscription's timer, due on the way, has handed its renewal to the workspace: wait until it is handled.
  await server.services.actors.drain();
  t.equal(await credits(server, owner.cookie, ws), 15100, 'the replaced subscription does not renew');
  clock.advance(6 * DAY);
  t.equal(
    await until(
      () => credits(server, owner.cookie, ws),
      (n) => n === 27100,
    ),
    27100,
    'the team subscription renews',
  );
  const payments = await get(server, `/v1/billing/payments?workspaceId=${ws}`, owner.cookie);
  t.same(
    payments.body.data.map((p: { plan: string; status: string }) => `${p.plan}:${p.status}`),
    ['team:succeeded', 'team:succeeded', 'pro:succeeded'],
  );
});

t.test('a declined checkout starts nothing; members and other workspaces are refused', async (t) => {
  const server = await startTestServer(t, { env: ENV });
  const owner = await signUp(server);
  const stranger = await signUp(server);
  const ws = owner.workspaceId;
  const checkout = await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'team' });
  t.equal(checkout.status, 201);
  await completeCheckout(checkout.body.checkoutUrl, 'decline');
  t.match((await get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie)).body, { plan: 'free', status: 'none' });
  t.match((await get(server, `/v1/billing/payments?workspaceId=${ws}`, owner.cookie)).body.data, [{ id: checkout.body.paymentId, status: 'failed' }]);
  t.equal(await credits(server, owner.cookie, ws), 100);

  // A member (not owner or admin) reads billing but cannot change it.
  const invite = await post(server, `/v1/workspaces/${ws}/invitations`, owner.cookie, { email: stranger.email, role: 'member' });
  t.equal(invite.status, 201, JSON.stringify(invite.body));
  const accepted = await post(server, '/v1/invitations/accept', stranger.cookie, { token: invite.body.token });
  t.equal(accepted.status, 200, JSON.stringify(accepted.body));
  t.equal((await get(server, `/v1/billing/subscription?workspaceId=${ws}`, stranger.cookie)).status, 200);
  t.match(await post(server, '/v1/billing/checkout', stranger.cookie, { workspaceId: ws, plan: 'pro' }), {
    status: 403,
    body: { error: { code: 'forbidden' } },
  });
  t.match(await post(server, '/v1/billing/portal', stranger.cookie, { workspaceId: ws }), { status: 403 });
  t.match(await post(server, '/v1/wallet/top-ups', stranger.cookie, { workspaceId: ws, amountCents: 1000 }), { status: 403 });

  const outsider = await signUp(server);
  t.match(await post(server, '/v1/billing/checkout', outsider.cookie, { workspaceId: ws, plan: 'pro' }), { status: 404 });
  t.match(await get(server, `/v1/billing/subscription?workspaceId=${ws}`, outsider.cookie), { status: 404 });
  const otherKey = await createKey(server, outsider.cookie, outsider.workspaceId, ['all']);
  t.match(await get(server, `/v1/billing/payments?workspaceId=${ws}`, otherKey.key), { status: 403 });
  t.match(await post(server, '/v1/billing/cancel', otherKey.key, { workspaceId: ws }), { status: 403 });
  const ownKey = await createKey(server, owner.cookie, ws, ['wallet.write']);
  t.equal((await post(server, '/v1/billing/portal', ownKey.key, { workspaceId: ws })).status, 200, 'a key with wallet.write manages billing');
});

t.test('a renewal that fell due while the service was down runs once at start-up', async (t) => {
  const { dataDir, postgres } = await durableStorage(t, 'gs-money-renew-');
  const options = (clock: ManualClock) => ({
    clock,
    env: { ...ENV, DATA_DIR: dataDir, ...(postgres ? {} : { DATABASE_URL: '' }) },
    ...(postgres ? { databaseUrl: postgres.url } : {}),
  });
  const start = Date.UTC(2026, 0, 10);
  const first = await startTestServer(t, options(new ManualClock(start)));
  const owner = await signUp(first);
  const checkout = await post(first, '/v1/billing/checkout', owner.cookie, { workspaceId: owner.workspaceId, plan: 'pro' });
  await completeCheckout(checkout.body.checkoutUrl, 'pay');
  t.equal(await credits(first, owner.cookie, owner.workspaceId), 3100);
  await first.stop();

  const clock = new ManualClock(start + 40 * DAY);
  const second = await startTestServer(t, options(clock));
  await until(
    async () => second.services.billing.renewals.pending(),
    (n) => n > 0,
  );
  clock.advance(0);
  const renewed = await until(
    () => credits(second, owner.cookie, owner.workspaceId),
    (n) => n === 6100,
  );
  t.equal(renewed, 6100, 'the missed renewal ran');
  clock.advance(0);
  const sub = await get(second, `/v1/billing/subscription?workspaceId=${owner.workspaceId}`, owner.cookie);
  t.match(sub.body.subscription, { currentPeriodStart: '2026-02-10T00:00:00.000Z', currentPeriodEnd: '2026-03-10T00:00:00.000Z' });
  t.equal(await credits(second, owner.cookie, owner.workspaceId), 6100, 'once');
  const books = await checkBooks(second, owner.workspaceId);
  t.same(books.balances, books.sums);
});

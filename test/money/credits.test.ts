import t from 'tap';
import { sharedTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { checkBooks, completeCheckout, get, MONEY_ENV, post, sendEvent, signedEvent } from './support.ts';

t.test('credits: balance and ledger, a top-up paid at the local checkout grants its credits once', async (t) => {
  const server = await sharedTestServer(MONEY_ENV);
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['usage.read', 'wallet.write']);

  const start = await get(server, `/v1/workspaces/${owner.workspaceId}/credits`, key.key);
  t.equal(start.status, 200);
  t.match(start.body, { workspaceId: owner.workspaceId, plan: 'free', availableCredits: 100, reservedCredits: 0 });
  t.match(start.body.ledger, [{ kind: 'grant', credits: 100, reference: 'plan:free:opening' }]);

  const order = await post(server, '/v1/credits/top-ups', key.key, { workspaceId: owner.workspaceId, credits: 500 });
  t.equal(order.status, 201, JSON.stringify(order.body));
  t.match(
    order.body,
    { id: /^top_/, paymentId: /^pay_/, credits: 500, amountCents: 2500, status: 'pending', completedAt: null },
    'free plan: 5 cents per credit',
  );
  t.match(order.body.checkoutUrl, new RegExp(`^${server.url}/v1/billing/local/checkout/${order.body.paymentId}\\?token=`));

  const unpaid = await get(server, `/v1/workspaces/${owner.workspaceId}/credits`, key.key);
  t.equal(unpaid.body.availableCredits, 100, 'nothing granted before the payment');

  const paid = await completeCheckout(order.body.checkoutUrl, 'pay');
  t.equal(paid.status, 200);
  t.match(paid.page, /paid/);
  const after = await get(server, `/v1/workspaces/${owner.workspaceId}/credits`, key.key);
  t.equal(after.body.availableCredits, 600);
  t.match(after.body.ledger[0], { kind: 'grant', credits: 500, reference: `top:${order.body.id}` });

  const list = await get(server, `/v1/credits/top-ups?workspaceId=${owner.workspaceId}`, key.key);
  t.equal(list.status, 200);
  t.match(list.body.data, [{ id: order.body.id, status: 'paid', credits: 500 }]);
  t.type(list.body.data[0].completedAt, 'string');

  // The provider resends: a new event id for the same payment, and the very same event again. Nothing moves.
  const again = await sendEvent(server, signedEvent(order.body.paymentId, 'payment.succeeded'));
  t.same([again.status, again.body], [200, { received: true, applied: false }]);
  const replay = signedEvent(order.body.paymentId, 'payment.failed');
  t.same((await sendEvent(server, replay)).body, { received: true, applied: false }, 'a late failure of a paid payment changes nothing');
  const repage = await completeCheckout(order.body.checkoutUrl, 'pay').catch((error: Error) => error);
  t.ok(repage instanceof Error || repage.status === 409, 'the checkout cannot be paid twice');
  t.equal((await get(server, `/v1/workspaces/${owner.workspaceId}/credits`, key.key)).body.availableCredits, 600);

  const payments = await get(server, `/v1/billing/payments?workspaceId=${owner.workspaceId}`, owner.cookie);
  t.match(payments.body.data, [{ id: order.body.paymentId, purpose: 'credit_top_up', orderId: order.body.id, amountCents: 2500, status: 'succeeded' }]);

  const books = await checkBooks(server, owner.workspaceId);
  t.same(books.balances, books.sums, 'balances equal the ledger sums');
  const [grants] = await server.services.db
    .em()
    .execute<Array<{ n: string }>>(`select count(*)::int8 as n from credit_ledger where reference = ?`, [`top:${order.body.id}`]);
  t.equal(Number(grants!.n), 1, 'one grant for the order');
});

t.test('a declined checkout fails the order; an event applied once by id; signatures are checked before anything', async (t) => {
  const server = await sharedTestServer(MONEY_ENV);
  const owner = await signUp(server);

  const declined = await post(server, '/v1/credits/top-ups', owner.cookie, { workspaceId: owner.workspaceId, credits: 100 });
  t.equal(declined.status, 201);
  const page = await completeCheckout(declined.body.checkoutUrl, 'decline');
  t.match(page.page, /declined/);
  const list = await get(server, `/v1/credits/top-ups?workspaceId=${owner.workspaceId}`, owner.cookie);
  t.match(list.body.data, [{ id: declined.body.id, status: 'failed' }]);
  const payments = await get(server, `/v1/billing/payments?workspaceId=${owner.workspaceId}`, owner.cookie);
  t.match(payments.body.data, [{ id: declined.body.paymentId, status: 'failed', failureReason: 'card_declined' }]);
  t.same(
    (await sendEvent(server, signedEvent(declined.body.paymentId, 'payment.succeeded'))).body,
    { received: true, applied: false },
    'a failed payment is not paid later',
  );

  const order = await post(server, '/v1/credits/top-ups', owner.cookie, { workspaceId: owner.workspaceId, credits: 200 });
  const event = signedEvent(order.body.paymentId, 'payment.succeeded');
  const refusals = [
    await sendEvent(server, { raw: event.raw, signature: event.signature.replace(/v1=[0-9a-f]/, 'v1=x') }),
    await sendEvent(server, { raw: event.raw.replace('payment.succeeded', 'payment.failed'), signature: event.signature }),
    await sendEvent(server, signedEvent(order.body.paymentId, 'payment.succeeded', { secret: 'another-secret-of-at-least-32-characters' })),
    await sendEvent(server, signedEvent(order.body.paymentId, 'payment.succeeded', { at: Date.now() - 10 * 60_000 })),
    await server.json('/v1/billing/events/local', { method: 'POST', headers: { 'content-type': 'application/json' }, body: event.raw }),
  ];
  for (const refused of refusals) t.match(refused, { status: 400, body: { error: { code: 'validation_error' } } });
  t.equal((await get(server, `/v1/workspaces/${owner.workspaceId}/credits`, owner.cookie)).body.availableCredits, 100, 'no refused event moved anything');

  const results = await Promise.all([sendEvent(server, event), sendEvent(server, event), sendEvent(server, event)]);
  t.same(results.map((r) => r.body.applied).sort(), [false, false, true], 'the same event three times at once: applied once');
  t.equal((await get(server, `/v1/workspaces/${owner.workspaceId}/credits`, owner.cookie)).body.availableCredits, 300);
  const [recorded] = await server.services.db
    .em()
    .execute<Array<{ n: string }>>('select count(*)::int8 as n from billing_events where payment_id = ?', [order.body.paymentId]);
  t.equal(Number(recorded!.n), 1);

  t.same(
    (await sendEvent(server, signedEvent('pay_unknown', 'payment.succeeded'))).body,
    { received: true, applied: false },
    'an unknown payment is acknowledged and ignored',
  );
  const wrongToken = await fetch(order.body.checkoutUrl.replace(/token=[0-9a-f]{4}/, 'token=0000'));
  t.equal(wrongToken.status, 404, 'a checkout link with a wrong token');
});

t.test('credits: refusals, scopes and tenant isolation', async (t) => {
  const server = await sharedTestServer(MONEY_ENV);
  const a = await signUp(server);
  const b = await signUp(server);
  const readOnly = await createKey(server, a.cookie, a.workspaceId, ['usage.read']);
  const generationsOnly = await createKey(server, a.cookie, a.workspaceId, ['generations.read']);
  const keyB = await createKey(server, b.cookie, b.workspaceId, ['all']);

  t.match(
    await post(server, '/v1/credits/top-ups', readOnly.key, { workspaceId: a.workspaceId, credits: 100 }),
    { status: 403, body: { error: { code: 'forbidden' } } },
    'usage.read cannot buy',
  );
  t.match(await get(server, `/v1/workspaces/${a.workspaceId}/credits`, generationsOnly.key), { status: 403 }, 'credits need usage.read');
  t.match(await get(server, `/v1/credits/top-ups?workspaceId=${a.workspaceId}`, generationsOnly.key), { status: 403 });
  t.match(
    await post(server, '/v1/credits/top-ups', a.cookie, { workspaceId: a.workspaceId, credits: 99 }),
    { status: 400, body: { error: { code: 'validation_error' } } },
    'below 100 credits',
  );
  t.match(await post(server, '/v1/credits/top-ups', a.cookie, { workspaceId: a.workspaceId, credits: 1.5 }), { status: 400 });

  const order = await post(server, '/v1/credits/top-ups', a.cookie, { workspaceId: a.workspaceId, credits: 100 });
  t.match(await get(server, `/v1/workspaces/${a.workspaceId}/credits`, keyB.key), { status: 403 }, 'a key of B on A');
  t.match(await get(server, `/v1/workspaces/${a.workspaceId}/credits`, b.cookie), { status: 404 }, 'a stranger sees no workspace');
  t.match(await get(server, `/v1/credits/top-ups?workspaceId=${a.workspaceId}`, b.cookie), { status: 404 });
  t.match(await get(server, `/v1/billing/payments?workspaceId=${a.workspaceId}`, b.cookie), { status: 404 });
  const listB = await get(server, `/v1/credits/top-ups?workspaceId=${b.workspaceId}`, keyB.key);
  t.same(listB.body.data, [], "B sees none of A's orders");
  t.ok(order.body.id);

  // Pagination: newest first, by cursor.
  for (let i = 0; i < 3; i++) await post(server, '/v1/credits/top-ups', a.cookie, { workspaceId: a.workspaceId, credits: 100 + i });
  const first = await get(server, `/v1/credits/top-ups?workspaceId=${a.workspaceId}&limit=3`, a.cookie);
  t.equal(first.body.data.length, 3);
  t.type(first.body.nextCursor, 'string');
  const second = await get(server, `/v1/credits/top-ups?workspaceId=${a.workspaceId}&limit=3&cursor=${first.body.nextCursor}`, a.cookie);
  t.same(
    second.body.data.map((o: { id: string }) => o.id),
    [order.body.id],
  );
  t.equal(second.body.nextCursor, null);
});

t.test('the provider event endpoint: unknown provider, size limit', async (t) => {
  const server = await sharedTestServer(MONEY_ENV);
  const event = signedEvent('pay_x', 'payment.succeeded');
  const unknown = await server.json('/v1/billing/events/stripe', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-billing-signature': event.signature },
    body: event.raw,
  });
  t.match(unknown, { status: 404, body: { error: { code: 'not_found' } } });
  const big = `{"pad":"${'x'.repeat(70 * 1024)}"}`;
  const tooBig = await server.json('/v1/billing/events/local', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-billing-signature': signedEvent('pay_x', 'payment.succeeded').signature },
    body: big,
  });
  t.match(tooBig, { status: 413, body: { error: { code: 'payload_too_large' } } });
});

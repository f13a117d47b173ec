import t from 'tap';
import type { ChargeResult, PaymentIntent } from '../../actors/billing/provider.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { eventually } from '../helpers/eventually.ts';
import { signUp } from '../helpers/identity.ts';
import { checkBooks, completeCheckout, get, MONEY_ENV, post } from './support.ts';

/**
 * A charge of the saved card (a renewal, an auto-recharge) goes over the network to the payment provider:
 * the workspace actor makes it beside its mailbox and goes on with its messages meanwhile; the result comes
 * back as a message of its own (actors/workspace/payments.ts). The provider's charge is held open here, so
 * what the workspace answers while it is under way can be seen.
 */

const DAY = 86_400_000;
/** Sessions that outlive the months the clock is moved on. */
const ENV = { ...MONEY_ENV, SESSION_TTL_HOURS: '8760' };

/** The service's payment provider with its saved-card charges held until the test answers each. */
function heldCharges(server: TestServer) {
  const provider = server.services.billing.provider;
  const asked: Array<{ intent: PaymentIntent; answer: (result: ChargeResult) => void }> = [];
  provider.chargeSaved = (intent) => new Promise<ChargeResult>((answer) => asked.push({ intent, answer }));
  return asked;
}

async function deposit(server: TestServer, cookie: string, workspaceId: string, amountCents: number) {
  const order = await post(server, '/v1/wallet/top-ups', cookie, { workspaceId, amountCents });
  if (order.status !== 201) throw new Error(`deposit: ${order.status} ${JSON.stringify(order.body)}`);
  await completeCheckout(order.body.checkoutUrl, 'pay');
}

t.test(
  "a renewal's charge does not hold the workspace: it answers meanwhile, is never charged twice, and a decline ends the subscription past due",
  async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 0, 10, 12));
    const server = await startTestServer(t, { env: ENV, clock });
    const owner = await signUp(server);
    const ws = owner.workspaceId;
    const checkout = await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'pro' });
    t.equal(checkout.status, 201);
    await completeCheckout(checkout.body.checkoutUrl, 'pay');
    const subscriptionId = checkout.body.subscriptionId as string;
    const asked = heldCharges(server);

    clock.advance(31 * DAY);
    await eventually(() => asked.length === 1, { what: "the renewal's charge" });
    t.match(asked[0]!.intent, { workspaceId: ws, amountCents: 2900, paymentId: /^pay_/ });

    // The workspace actor answers while its card is being charged.
    const wallet = await get(server, `/v1/wallet?workspaceId=${ws}`, owner.cookie);
    t.equal(wallet.status, 200, 'the workspace answers while the charge is under way');
    const again = await server.services.actors.ask('ws', ws, { type: 'renew', subscriptionId });
    t.same(again, { nextAt: null }, 'a renewal asked again meanwhile leaves it to the charge under way');
    t.equal(asked.length, 1, 'and charges nothing more');
    const before = await get(server, `/v1/workspaces/${ws}/credits`, owner.cookie);
    t.equal(before.body.availableCredits, 3100, 'no credits before the charge answers');

    asked[0]!.answer({ ok: false, reason: 'card_declined' });
    await eventually(async () => (await get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie)).body.plan === 'free', {
      what: 'the subscription ended',
    });
    const payments = await get(server, `/v1/billing/payments?workspaceId=${ws}`, owner.cookie);
    t.match(payments.body.data[0], { id: asked[0]!.intent.paymentId, purpose: 'subscription', status: 'failed', amountCents: 2900 });
    t.equal((await get(server, `/v1/workspaces/${ws}/credits`, owner.cookie)).body.availableCredits, 3100, 'a declined renewal grants nothing');
    t.equal(server.services.billing.renewals.pending(), 0, 'an ended subscription is not scheduled again');
    const books = await checkBooks(server, ws);
    t.same(books.balances, books.sums);
  },
);

t.test("a renewal's charge that succeeds grants the period and schedules the next one", async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 0, 10, 12));
  const server = await startTestServer(t, { env: ENV, clock });
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const checkout = await post(server, '/v1/billing/checkout', owner.cookie, { workspaceId: ws, plan: 'pro' });
  await completeCheckout(checkout.body.checkoutUrl, 'pay');
  const asked = heldCharges(server);

  clock.advance(31 * DAY);
  await eventually(() => asked.length === 1, { what: "the renewal's charge" });
  asked[0]!.answer({ ok: true, reference: 'ch_test' });
  await eventually(async () => (await get(server, `/v1/workspaces/${ws}/credits`, owner.cookie)).body.availableCredits === 6100, {
    what: "the next period's credits",
  });
  const sub = await get(server, `/v1/billing/subscription?workspaceId=${ws}`, owner.cookie);
  t.match(sub.body.subscription, { status: 'active', currentPeriodStart: '2026-02-10T12:00:00.000Z', currentPeriodEnd: '2026-03-10T12:00:00.000Z' });
  t.equal(server.services.billing.renewals.pending(), 1, 'the next renewal is scheduled by the charge that succeeded');

  clock.advance(28 * DAY);
  await eventually(() => asked.length === 2, { what: 'the next renewal' });
  t.equal(asked.length, 2, 'one charge per period');
  asked[1]!.answer({ ok: true, reference: 'ch_test_2' });
  await eventually(async () => (await get(server, `/v1/workspaces/${ws}/credits`, owner.cookie)).body.availableCredits === 9100, {
    what: "the third period's credits",
  });
  const books = await checkBooks(server, ws);
  t.same(books.balances, books.sums);
});

t.test('an auto-recharge charges the card beside the mailbox: one at a time, deposited when paid, turned off when declined', async (t) => {
  const server = await startTestServer(t, { env: MONEY_ENV });
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  await deposit(server, owner.cookie, ws, 1000);
  const asked = heldCharges(server);

  const enabled = await post(
    server,
    '/v1/wallet',
    owner.cookie,
    { workspaceId: ws, autoRecharge: { enabled: true, thresholdCents: 2000, amountCents: 1500 } },
    'PATCH',
  );
  t.equal(enabled.status, 200);
  await eventually(() => asked.length === 1, { what: 'the auto-recharge charge' });
  t.match(asked[0]!.intent, { workspaceId: ws, amountCents: 1500 });

  const meanwhile = await get(server, `/v1/wallet?workspaceId=${ws}`, owner.cookie);
  t.match(meanwhile.body, { balanceCents: 1000, autoRechargeUnderWay: true }, 'answered while the charge is under way, which it says');
  const changed = await post(server, '/v1/wallet', owner.cookie, { workspaceId: ws, monthlySpendCapCents: 100_000 }, 'PATCH');
  t.equal(changed.status, 200, 'settings change meanwhile');
  t.equal(asked.length, 1, 'no second charge while one is under way');

  asked[0]!.answer({ ok: true, reference: 'ch_recharge' });
  await eventually(async () => (await get(server, `/v1/wallet?workspaceId=${ws}`, owner.cookie)).body.balanceCents === 2500, { what: 'the deposit' });
  const paid = await get(server, `/v1/wallet?workspaceId=${ws}`, owner.cookie);
  t.match(paid.body, { balanceCents: 2500, autoRechargeUnderWay: false });
  t.match((await get(server, `/v1/wallet/deposits?workspaceId=${ws}`, owner.cookie)).body.data[0], {
    source: 'auto_recharge',
    status: 'paid',
    amountCents: 1500,
  });

  // Above the threshold again: a higher one starts the next charge, which is declined.
  await post(server, '/v1/wallet', owner.cookie, { workspaceId: ws, autoRecharge: { thresholdCents: 3000 } }, 'PATCH');
  await eventually(() => asked.length === 2, { what: 'the second charge' });
  asked[1]!.answer({ ok: false, reason: 'card_declined' });
  await eventually(async () => (await get(server, `/v1/wallet?workspaceId=${ws}`, owner.cookie)).body.settings.autoRecharge.enabled === false, {
    what: 'auto-recharge turned off',
  });
  const after = await get(server, `/v1/wallet?workspaceId=${ws}`, owner.cookie);
  t.match(after.body, { balanceCents: 2500, autoRechargeUnderWay: false });
  t.match((await get(server, `/v1/wallet/deposits?workspaceId=${ws}`, owner.cookie)).body.data[0], {
    source: 'auto_recharge',
    status: 'failed',
    amountCents: 1500,
  });
  t.equal(asked.length, 2, 'a declined card is not charged again');
  const books = await checkBooks(server, ws);
  t.same(books.balances, books.sums);
  t.equal(books.balances.wallet_cents, 2500);
});

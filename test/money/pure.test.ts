import t from 'tap';
import {
  checkWalletSettings,
  defaultWalletSettings,
  deposit,
  emptyAccount,
  grant,
  monthOf,
  needsAutoRecharge,
  release,
  reserveWithinCap,
  spendAt,
  spendChange,
  type Account,
} from '../../domain/account.ts';
import { addMonth, nextPeriodEnd, periodGrantReference } from '../../actors/billing/period.ts';
import { LocalPaymentProvider } from '../../actors/billing/local/provider.ts';
import { ManualClock } from '../../runtime/clock.ts';

function walletAccount(cents: number): Account {
  const funded = deposit(emptyAccount(), cents, 'dep:1');
  if (!funded.ok) throw new Error('deposit refused');
  return funded.account;
}

t.test('monthly spend cap: a wallet part past the cap is wallet_insufficient_balance; credits are not capped', async (t) => {
  const account = walletAccount(10_000);
  const spend = { month: '2026-01', spentCents: 900 };
  const within = reserveWithinCap(account, 'gen_1', 20, 'wallet', 5, 1_000, spend);
  t.ok(within.ok, '900 + 100 reaches the cap exactly: allowed');
  const past = reserveWithinCap(account, 'gen_2', 21, 'wallet', 5, 1_000, spend);
  t.same(past.ok ? null : past.code, 'wallet_insufficient_balance', '900 + 105 passes the cap');
  t.match(past.ok ? '' : past.message, /monthly spend cap of 1000 cents leaves 100/);
  t.ok(reserveWithinCap(account, 'gen_3', 21, 'wallet', 5, null, spend).ok, 'no cap: only the balance counts');

  const withCredits = grant(account, 50, 'plan:x');
  if (!withCredits.ok) throw new Error('grant refused');
  t.ok(reserveWithinCap(withCredits.account, 'gen_4', 50, 'auto', 5, 0, spend).ok, 'auto paid fully from credits ignores a zero cap');
  const autoPast = reserveWithinCap(withCredits.account, 'gen_5', 51, 'auto', 5, 0, spend);
  t.same(autoPast.ok ? null : autoPast.code, 'wallet_insufficient_balance', 'the wallet part of auto is capped');
});

t.test('spend follows reservations and releases, and starts again each UTC month', async (t) => {
  const account = walletAccount(10_000);
  const reserved = reserveWithinCap(account, 'gen_1', 10, 'wallet', 4, null, { month: '2026-01', spentCents: 0 });
  if (!reserved.ok) throw new Error('refused');
  t.equal(spendChange(reserved.entries), 40);
  const released = release(reserved.account, 'gen_1');
  if (!released.ok) throw new Error('refused');
  t.equal(spendChange(released.entries), -40, 'a released job gives its spend back');
  t.equal(monthOf(Date.UTC(2026, 1, 1)), '2026-02');
  t.same(spendAt({ month: '2026-01', spentCents: 500 }, Date.UTC(2026, 0, 31, 23, 59)), { month: '2026-01', spentCents: 500 });
  t.same(spendAt({ month: '2026-01', spentCents: 500 }, Date.UTC(2026, 1, 1)), { month: '2026-02', spentCents: 0 });
});

t.test('auto-recharge: only when enabled, active, under the threshold, and not already under way', async (t) => {
  const settings = { autoRecharge: { enabled: true, thresholdCents: 2_000, amountCents: 1_500 }, monthlySpendCapCents: null };
  t.ok(needsAutoRecharge(walletAccount(1_000), settings, false));
  t.notOk(needsAutoRecharge(walletAccount(1_000), settings, true), 'one at a time');
  t.notOk(needsAutoRecharge(walletAccount(2_000), settings, false), 'at the threshold: no');
  t.notOk(needsAutoRecharge(emptyAccount(), settings, false), 'a wallet never activated is not recharged');
  t.notOk(needsAutoRecharge(walletAccount(1_000), defaultWalletSettings(), false), 'disabled by default');
});

t.test('wallet settings are checked', async (t) => {
  t.equal(checkWalletSettings(defaultWalletSettings()), undefined);
  t.match(
    checkWalletSettings({ autoRecharge: { enabled: true, thresholdCents: 500, amountCents: 999 }, monthlySpendCapCents: null }),
    /amountCents: must be at least 1000/,
  );
  t.match(checkWalletSettings({ autoRecharge: { enabled: true, thresholdCents: 0, amountCents: 1000 }, monthlySpendCapCents: null }), /thresholdCents/);
  t.match(checkWalletSettings({ autoRecharge: { enabled: false, thresholdCents: 0, amountCents: 0 }, monthlySpendCapCents: -1 }), /monthlySpendCapCents/);
});

t.test('billing periods are calendar months in UTC', async (t) => {
  t.equal(new Date(addMonth(Date.UTC(2026, 0, 15, 10))).toISOString(), '2026-02-15T10:00:00.000Z');
  t.equal(new Date(addMonth(Date.UTC(2026, 0, 31))).toISOString(), '2026-02-28T00:00:00.000Z', 'clamped to the shorter month');
  t.equal(new Date(addMonth(Date.UTC(2026, 11, 5))).toISOString(), '2027-01-05T00:00:00.000Z', 'across the year');
  t.equal(periodGrantReference('sub_1', Date.UTC(2026, 0, 1)), 'sub:sub_1:period:2026-01-01T00:00:00.000Z');
  const anchor = Date.UTC(2026, 0, 31, 9);
  const ends = [addMonth(anchor)];
  for (let i = 0; i < 3; i++) ends.push(nextPeriodEnd(anchor, ends[ends.length - 1]!));
  t.same(
    ends.map((e) => new Date(e).toISOString().slice(0, 10)),
    ['2026-02-28', '2026-03-31', '2026-04-30', '2026-05-31'],
    'periods counted from the start do not drift',
  );
});

t.test('local provider events: signed, verified in constant time, refused when altered, unsigned or stale', async (t) => {
  const clock = new ManualClock();
  const provider = new LocalPaymentProvider({ secret: Buffer.from('x'.repeat(32)), baseUrl: () => 'http://svc', clock });
  const { raw, signature } = provider.event('pay_1', 'payment.succeeded');
  const event = provider.verifyEvent(Buffer.from(raw), signature);
  t.match(event, { type: 'payment.succeeded', paymentId: 'pay_1', id: /^evt_/ });
  t.equal(provider.verifyEvent(Buffer.from(raw.replace('pay_1', 'pay_2')), signature), null, 'an altered body');
  t.equal(provider.verifyEvent(Buffer.from(raw), undefined), null, 'no signature');
  t.equal(
    provider.verifyEvent(
      Buffer.from(raw),
      signature.replace(/v1=(.)/, (_, c: string) => `v1=${c === '0' ? '1' : '0'}`),
    ),
    null,
    'a wrong signature',
  );
  const other = new LocalPaymentProvider({ secret: Buffer.from('y'.repeat(32)), baseUrl: () => 'http://svc', clock });
  t.equal(other.verifyEvent(Buffer.from(raw), signature), null, 'another secret');
  clock.advance(6 * 60_000);
  t.equal(provider.verifyEvent(Buffer.from(raw), signature), null, 'older than 5 minutes');

  const url = new URL(provider.checkoutUrl({ paymentId: 'pay_1', workspaceId: 'ws_1', amountCents: 100, description: 'x' }));
  t.ok(provider.verifyCheckoutToken('pay_1', url.searchParams.get('token')!));
  t.notOk(provider.verifyCheckoutToken('pay_2', url.searchParams.get('token')!), 'a token is for one payment');
  const portal = new URL(provider.portalUrl('ws_1').url);
  t.ok(provider.verifyPortal('ws_1', Number(portal.searchParams.get('expires')), portal.searchParams.get('token')!));
  t.notOk(provider.verifyPortal('ws_2', Number(portal.searchParams.get('expires')), portal.searchParams.get('token')!));
  clock.advance(16 * 60_000);
  t.notOk(provider.verifyPortal('ws_1', Number(portal.searchParams.get('expires')), portal.searchParams.get('token')!), 'a portal session expires');
});

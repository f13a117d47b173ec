import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { MemoryRateLimiter } from '../../http/auth/limiter.ts';
import { AttemptContentionError, MemoryAttemptStore, type AttemptStore } from '../../http/auth/attempt-store.ts';
import { beginLoginAttempt, decideAttempt, LOGIN_THROTTLE, type LoginThrottleDeps } from '../../http/auth/login-throttle.ts';
import { ApiError } from '../../http/errors.ts';

// The throttle over its memory back ends, in process: the rules of login-throttle.test.ts without a server.
function setup(start = Date.UTC(2026, 0, 1, 0, 0, 30)) {
  const clock = new ManualClock(start);
  const deps: LoginThrottleDeps = { clock, limiter: new MemoryRateLimiter(clock), loginAttempts: new MemoryAttemptStore(clock) };
  /** One attempt: 'ok' once it may check the password (then it fails or succeeds as told), else the Retry-After seconds. */
  const attempt = async (email: string, address: string, outcome: 'fail' | 'succeed' = 'fail'): Promise<'ok' | number> => {
    try {
      const started = await beginLoginAttempt(deps, email, address);
      await (outcome === 'fail' ? started.failed() : started.succeeded());
      return 'ok';
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== 'rate_limited') throw error;
      return Number(error.headers?.['Retry-After']);
    }
  };
  return { clock, deps, attempt };
}

t.test('an account and address: free attempts, then waits that double, reset by a success', async (t) => {
  const { clock, attempt } = setup();
  for (let i = 0; i < LOGIN_THROTTLE.freeFailures; i++) t.equal(await attempt('a@x', '203.0.113.1'), 'ok', `free attempt ${i + 1}`);
  t.equal(await attempt('a@x', '203.0.113.1'), 1, 'the next waits a second');
  t.equal(await attempt('a@x', '203.0.113.2'), 'ok', 'another address does not wait');
  clock.advance(999);
  t.equal(await attempt('a@x', '203.0.113.1'), 1, 'a millisecond short: still waiting (Retry-After at least 1)');
  clock.advance(1);
  t.equal(await attempt('a@x', '203.0.113.1'), 'ok', 'after the wait');
  t.equal(await attempt('a@x', '203.0.113.1'), 2, 'then two seconds');
  clock.advance(2_000);
  t.equal(await attempt('a@x', '203.0.113.1', 'succeed'), 'ok', 'the right password after the wait');
  t.equal(await attempt('a@x', '203.0.113.1'), 'ok', 'a success forgets the attempts');
});

t.test('an address spraying many accounts waits for the next window', async (t) => {
  const { clock, attempt } = setup(Date.UTC(2026, 0, 1, 0, 0, 0) + 60_000);
  for (let i = 0; i < LOGIN_THROTTLE.perAddress; i++) {
    const answer = await attempt(`user${i}@x`, '198.51.100.7');
    if (answer !== 'ok') return t.fail(`attempt ${i + 1} refused`);
  }
  t.equal(await attempt('fresh@x', '198.51.100.7'), (LOGIN_THROTTLE.windowMs - 60_000) / 1000, 'the address is over its budget until the window ends');
  t.equal(await attempt('fresh@x', '198.51.100.8'), 'ok', 'another address is not');
  t.equal(await attempt('fresh@x', '198.51.100.7', 'succeed'), (LOGIN_THROTTLE.windowMs - 60_000) / 1000, 'not even with the right password');
  clock.advance(LOGIN_THROTTLE.windowMs - 60_000);
  t.equal(await attempt('fresh@x', '198.51.100.7'), 'ok', 'the next window');
});

t.test('an account attacked from many addresses: addresses that failed in the window wait; a clean one may try', async (t) => {
  const { clock, attempt } = setup(Date.UTC(2026, 0, 1, 0, 0, 0) + 60_000);
  for (let i = 0; i < LOGIN_THROTTLE.perAccount; i++) t.equal(await attempt('owner@x', `192.0.2.${i + 1}`), 'ok');
  const untilWindowEnd = (LOGIN_THROTTLE.windowMs - 60_000) / 1000;
  t.equal(await attempt('owner@x', '192.0.2.1'), untilWindowEnd, 'an address that failed in this window waits for its end');
  t.equal(await attempt('owner@x', '192.0.2.200', 'succeed'), 'ok', 'the owner from a clean address gets in');
  t.equal(await attempt('other@x', '192.0.2.1'), 'ok', 'the attacking address may still try other accounts');
  clock.advance(LOGIN_THROTTLE.windowMs - 60_000);
  t.equal(await attempt('owner@x', '192.0.2.1'), 'ok', 'the next window');
});

t.test("one client's IPv6 /64 counts as one address; IPv4-mapped as the IPv4 address", async (t) => {
  const { attempt } = setup();
  for (let i = 0; i < LOGIN_THROTTLE.freeFailures; i++) t.equal(await attempt('a@x', `2001:db8:1:2::${i + 1}`), 'ok');
  t.equal(await attempt('a@x', '2001:db8:1:2:ffff::9'), 1, 'another address of the /64 waits');
  t.equal(await attempt('a@x', '2001:db8:1:3::1'), 'ok', 'the next /64 does not');
  for (let i = 0; i < LOGIN_THROTTLE.freeFailures; i++) await attempt('b@x', '203.0.113.9');
  t.equal(await attempt('b@x', '::ffff:203.0.113.9'), 1);
});

t.test('a store that cannot apply the change for contention refuses for a second; other errors pass through', async (t) => {
  const { deps } = setup();
  const failing = (error: Error): AttemptStore => ({
    update: async () => {
      throw error;
    },
    delete: async () => {},
  });
  const contended = beginLoginAttempt({ ...deps, loginAttempts: failing(new AttemptContentionError('k')) }, 'a@x', '203.0.113.1');
  await t.rejects(contended, { code: 'rate_limited', headers: { 'Retry-After': '1' } });
  const broken = new Error('store down');
  await t.rejects(beginLoginAttempt({ ...deps, loginAttempts: failing(broken) }, 'a@x', '203.0.113.1'), broken);
});

t.test('a failed attempt counts against the address and the account; a success against neither', async (t) => {
  const { deps, attempt } = setup();
  const remaining = async (key: string, limit: number) => (await deps.limiter.peek(key, limit, LOGIN_THROTTLE.windowMs)).remaining;
  await attempt('a@x', '203.0.113.1', 'succeed');
  t.equal(await remaining('login-fail:addr:203.0.113.1', LOGIN_THROTTLE.perAddress), LOGIN_THROTTLE.perAddress);
  t.equal(await remaining('login-fail:acct:a@x', LOGIN_THROTTLE.perAccount), LOGIN_THROTTLE.perAccount);
  await attempt('a@x', '203.0.113.1');
  t.equal(await remaining('login-fail:addr:203.0.113.1', LOGIN_THROTTLE.perAddress), LOGIN_THROTTLE.perAddress - 1);
  t.equal(await remaining('login-fail:acct:a@x', LOGIN_THROTTLE.perAccount), LOGIN_THROTTLE.perAccount - 1);
});

t.test('the limits are the documented ones (docs/api.md "Login throttling")', async (t) => {
  t.same(
    { ...LOGIN_THROTTLE },
    {
      freeFailures: 5,
      firstWaitMs: 1_000,
      maxWaitMs: 900_000,
      forgetAfterMs: 86_400_000,
      windowMs: 900_000,
      perAddress: 50,
      perAccount: 20,
    },
  );
});

t.test('attempts are forgotten 24 hours after the last; waits stop doubling at 15 minutes', async (t) => {
  const { clock, attempt } = setup();
  let answer: 'ok' | number = 'ok';
  // Fail and wait as told until the wait stops growing.
  for (let i = 0; i < 40 && answer !== 900; i++) {
    answer = await attempt('a@x', '203.0.113.1');
    if (answer !== 'ok' && answer !== 900) clock.advance(answer * 1000);
  }
  t.equal(answer, 900, 'the wait grows to 15 minutes');
  clock.advance(900_000);
  t.equal(await attempt('a@x', '203.0.113.1'), 'ok', 'after it');
  t.equal(await attempt('a@x', '203.0.113.1'), 900, 'and stops there');
  clock.advance(86_400_000 - 1);
  t.equal(await attempt('a@x', '203.0.113.1'), 'ok', 'a moment before 24 hours: past the wait, still counted');
  t.equal(await attempt('a@x', '203.0.113.1'), 900, 'so the next waits the longest');
  clock.advance(86_400_000);
  t.equal(await attempt('a@x', '203.0.113.1'), 'ok', '24 hours after the last: forgotten');
  t.equal(await attempt('a@x', '203.0.113.1'), 'ok', 'free attempts again');
});

t.test('under attack, an address whose last attempt fell at the very start of the window waits for its end', async (t) => {
  const start = Date.UTC(2026, 0, 1);
  const window = { start, end: start + LOGIN_THROTTLE.windowMs };
  t.same(decideAttempt({ count: 1, last: start }, start + 10, window).result, { allowed: false, retryAt: window.end });
  t.same(decideAttempt({ count: 1, last: start - 1 }, start + 10, window).result, { allowed: true }, 'a millisecond before it does not count');
});

import t from 'tap';
import { randomBytes } from 'node:crypto';
import { ManualClock } from '../../runtime/clock.ts';
import { MemoryAttemptStore, type AttemptRecord, type AttemptStore } from '../../http/auth/attempt-store.ts';
import { RedisAttemptStore } from '../../http/auth/redis-attempt-store.ts';
import { decideAttempt, LOGIN_THROTTLE, throttledAddress, waitUntil } from '../../http/auth/login-throttle.ts';
import { connectRedis } from '../../runtime/redis.ts';
import { createLogger } from '../../runtime/logger.ts';

type Make = (clock: ManualClock) => Promise<{ store: AttemptStore; close(): Promise<void> }>;

const backends: Array<[string, Make | undefined]> = [
  ['memory', async (clock) => ({ store: new MemoryAttemptStore(clock), close: async () => {} })],
  [
    'redis',
    process.env.TEST_REDIS_URL
      ? async () => {
          const redis = await connectRedis(process.env.TEST_REDIS_URL!, createLogger('silent'));
          return { store: new RedisAttemptStore(redis, `test:attempts:${randomBytes(6).toString('hex')}:`), close: () => redis.close() };
        }
      : undefined,
  ],
];

const countUp = (now: number) => (current: AttemptRecord | undefined) => {
  const next = { count: (current?.count ?? 0) + 1, last: now };
  return { next, result: next.count };
};

for (const [name, make] of backends) {
  t.test(`${name} attempt store: atomic updates, delete, unchanged records`, { skip: !make && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock();
    const { store, close } = await make!(clock);
    t.teardown(close);
    const counts = await Promise.all(Array.from({ length: 10 }, () => store.update('k', 60_000, countUp(clock.now()))));
    t.same(
      [...counts].sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      'concurrent updates each see the one before',
    );
    t.equal(await store.update('k', 60_000, (current) => ({ result: current?.count })), 10, 'a change without a record to store leaves it');
    t.equal(await store.update('other', 60_000, (current) => ({ result: current })), undefined, 'keys are apart');
    await store.delete('k');
    t.equal(await store.update('k', 60_000, (current) => ({ result: current })), undefined, 'deleted');
  });
}

t.test('memory attempt store: records expire ttl after their last change', async (t) => {
  const clock = new ManualClock();
  const store = new MemoryAttemptStore(clock, 2);
  await store.update('a', 1000, countUp(clock.now()));
  clock.advance(999);
  t.equal(await store.update('a', 1000, (current) => ({ result: current?.count })), 1);
  clock.advance(1);
  t.equal(await store.update('a', 1000, (current) => ({ result: current })), undefined, 'expired');
  await store.update('b', 1000, countUp(clock.now()));
  await store.update('c', 1000, countUp(clock.now()));
  t.equal(store.size(), 2, 'the sweep dropped the expired record');
});

t.test('the rule for one account and address', async (t) => {
  const now = Date.UTC(2026, 0, 1);
  t.equal(waitUntil(undefined), 0);
  t.equal(waitUntil({ count: LOGIN_THROTTLE.freeFailures - 1, last: now }), 0, 'free attempts');
  t.equal(waitUntil({ count: LOGIN_THROTTLE.freeFailures, last: now }), now + 1000);
  t.equal(waitUntil({ count: LOGIN_THROTTLE.freeFailures + 3, last: now }), now + 8000, 'doubling');
  t.equal(waitUntil({ count: 1000, last: now }), now + LOGIN_THROTTLE.maxWaitMs, 'capped');

  t.same(decideAttempt({ count: 7, last: now }, now + 3999), { result: { allowed: false, retryAt: now + 4000 } }, 'refused, the record unchanged');
  t.same(decideAttempt({ count: 7, last: now }, now + 4000), { next: { count: 8, last: now + 4000 }, result: { allowed: true } }, 'counted');
  t.same(
    decideAttempt({ count: 7, last: now }, now + LOGIN_THROTTLE.forgetAfterMs),
    { next: { count: 1, last: now + LOGIN_THROTTLE.forgetAfterMs }, result: { allowed: true } },
    'forgotten',
  );

  const window = { start: now, end: now + LOGIN_THROTTLE.windowMs };
  t.same(decideAttempt(undefined, now + 10, window).result, { allowed: true }, 'under attack, a clean address may try');
  t.same(
    decideAttempt({ count: 1, last: now + 10 }, now + 20, window).result,
    { allowed: false, retryAt: window.end },
    'an address that failed in the window waits for its end',
  );
  t.same(decideAttempt({ count: 1, last: now - 10 }, now + 20, window).result, { allowed: true }, 'a failure before the window does not count');
});

t.test('the address attempts are counted against', async (t) => {
  t.equal(throttledAddress('203.0.113.7'), '203.0.113.7');
  t.equal(throttledAddress('::ffff:203.0.113.7'), '203.0.113.7', 'IPv4-mapped as IPv4');
  t.equal(throttledAddress('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64', 'IPv6 by /64');
  t.equal(throttledAddress('2001:db8:1:2:ffff::1'), '2001:db8:1:2::/64');
  t.equal(throttledAddress(''), '', 'unparsable as is');
});

import t from 'tap';
import { randomBytes } from 'node:crypto';
import { ManualClock } from '../../runtime/clock.ts';
import { MemoryRateLimiter, secondsUntil, type RateLimiter } from '../../http/auth/limiter.ts';
import { RedisRateLimiter } from '../../http/auth/redis-limiter.ts';
import { connectRedis } from '../../runtime/redis.ts';
import { createLogger } from '../../runtime/logger.ts';

type Make = (clock: ManualClock) => Promise<{ limiter: RateLimiter; close(): Promise<void> }>;

const backends: Array<[string, Make | undefined]> = [
  ['memory', async (clock) => ({ limiter: new MemoryRateLimiter(clock), close: async () => {} })],
  [
    'redis',
    process.env.TEST_REDIS_URL
      ? async (clock) => {
          const redis = await connectRedis(process.env.TEST_REDIS_URL!, createLogger('silent'));
          return { limiter: new RedisRateLimiter(redis, clock, `test:limiter:${randomBytes(6).toString('hex')}:`), close: () => redis.close() };
        }
      : undefined,
  ],
];

for (const [name, make] of backends) {
  t.test(`${name} limiter: fixed windows aligned to the clock`, { skip: !make && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 45));
    const { limiter, close } = await make!(clock);
    t.teardown(close);
    const first = await limiter.hit('k', 3, 60_000);
    t.same(first, { allowed: true, limit: 3, remaining: 2, resetAt: Date.UTC(2026, 0, 1, 0, 1, 0) });
    t.equal(secondsUntil(first.resetAt, clock.now()), 15);
    await limiter.hit('k', 3, 60_000);
    t.same(await limiter.peek('k', 3, 60_000), { allowed: true, limit: 3, remaining: 1, resetAt: first.resetAt }, 'peek does not count');
    t.same(await limiter.peek('k', 3, 60_000), { allowed: true, limit: 3, remaining: 1, resetAt: first.resetAt });
    t.equal((await limiter.hit('k', 3, 60_000)).allowed, true, 'the third is allowed');
    const fourth = await limiter.hit('k', 3, 60_000);
    t.same(fourth, { allowed: false, limit: 3, remaining: 0, resetAt: first.resetAt }, 'the fourth is not');
    t.equal((await limiter.hit('other', 3, 60_000)).remaining, 2, 'keys count apart');
    clock.advance(15_000);
    t.same(await limiter.hit('k', 3, 60_000), { allowed: true, limit: 3, remaining: 2, resetAt: Date.UTC(2026, 0, 1, 0, 2, 0) }, 'a new window');
    await limiter.reset('k', 60_000);
    t.equal((await limiter.peek('k', 3, 60_000)).remaining, 3, 'reset forgets the window');
    const long = await limiter.hit('slow', 10, 15 * 60_000);
    t.equal(long.resetAt, Date.UTC(2026, 0, 1, 0, 15, 0), 'other window lengths align on their own multiples');
  });
}

for (const [name, make] of backends) {
  t.test(`${name} limiter: concurrent hits of one key each get their own place in the count`, { skip: !make && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 10));
    const { limiter, close } = await make!(clock);
    t.teardown(close);
    // Made in one turn of the event loop: the Redis limiter counts them with one command.
    const windows = await Promise.all(Array.from({ length: 5 }, () => limiter.hit('busy', 3, 60_000)));
    t.same(
      windows.map((w) => w.remaining),
      [2, 1, 0, 0, 0],
    );
    t.same(
      windows.map((w) => w.allowed),
      [true, true, true, false, false],
    );
    const [other, again] = await Promise.all([limiter.hit('quiet', 3, 60_000), limiter.hit('busy', 3, 60_000)]);
    t.equal(other.remaining, 2, 'another key in the same turn counts apart');
    t.equal(again.allowed, false);
    t.equal((await limiter.peek('busy', 3, 60_000)).remaining, 0);
  });
}

t.test('the memory limiter forgets finished windows, so memory follows active keys', async (t) => {
  const clock = new ManualClock();
  const limiter = new MemoryRateLimiter(clock, 10);
  for (let i = 0; i < 9; i++) await limiter.hit(`k${i}`, 5, 1000);
  t.equal(limiter.size(), 9);
  clock.advance(1000);
  await limiter.hit('fresh', 5, 1000);
  t.equal(limiter.size(), 1, 'the sweep on the 10th new counter dropped the 9 finished ones');
});

t.test('the Redis limiter gives each window key an expiry', { skip: !process.env.TEST_REDIS_URL && 'needs TEST_REDIS_URL' }, async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 50));
  const redis = await connectRedis(process.env.TEST_REDIS_URL!, createLogger('silent'));
  t.teardown(() => redis.close());
  const prefix = `test:limiter-ttl:${randomBytes(6).toString('hex')}:`;
  const limiter = new RedisRateLimiter(redis, clock, prefix);
  await limiter.hit('k', 5, 60_000);
  const keys = await redis.keys(`${prefix}*`);
  t.equal(keys.length, 1);
  const ttl = await redis.pTTL(keys[0]!);
  t.ok(ttl > 0 && ttl <= 15_000, `expires shortly after its window ends (${ttl} ms)`);
});

import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { MemoryRateLimiter, secondsUntil, windowOf, windowState } from '../../http/auth/limiter.ts';

t.test('Retry-After: whole seconds until the reset, rounded up, at least one', async (t) => {
  const now = Date.UTC(2026, 0, 1);
  t.equal(secondsUntil(now + 1_500, now), 2, 'part of a second counts as a whole one');
  t.equal(secondsUntil(now + 3_003, now), 4);
  t.equal(secondsUntil(now + 3_000, now), 3);
  t.equal(secondsUntil(now + 1, now), 1);
  t.equal(secondsUntil(now, now), 1, 'a reset due now still says 1');
  t.equal(secondsUntil(now - 5_000, now), 1, 'and one already past');
});

t.test('windows and their state', async (t) => {
  t.same(windowOf(125_000, 60_000), { start: 120_000, resetAt: 180_000 });
  t.same(windowState(3, 3, 9), { allowed: true, limit: 3, remaining: 0, resetAt: 9 }, 'the limit itself is allowed');
  t.same(windowState(4, 3, 9), { allowed: false, limit: 3, remaining: 0, resetAt: 9 }, 'one past it is not, and remaining stays 0');
});

t.test('the memory limiter sweeps windows that have passed every 4096 new counters by default', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const limiter = new MemoryRateLimiter(clock);
  for (let i = 0; i < 4095; i++) limiter.hit(`k${i}`, 10, 1_000);
  clock.advance(1_000);
  t.equal(limiter.size(), 4095, 'no sweep before the 4096th new counter');
  limiter.hit('last', 10, 1_000);
  t.equal(limiter.size(), 1, 'the 4096th sweeps every counter whose window has passed');
});

t.test('the memory limiter sweeps every sweepEvery new counters, and counts again from zero after a sweep', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const limiter = new MemoryRateLimiter(clock, 3);
  limiter.hit('a', 10, 1_000);
  clock.advance(1_000); // a's window has passed
  limiter.hit('b', 10, 60_000);
  limiter.hit('b', 10, 60_000);
  t.equal(limiter.size(), 2, 'two new counters: no sweep yet');
  limiter.hit('c', 10, 60_000);
  t.equal(limiter.size(), 2, 'the third sweeps the passed window and keeps the current ones');
  clock.advance(60_000);
  limiter.hit('d', 10, 1_000);
  limiter.hit('e', 10, 1_000);
  t.equal(limiter.size(), 4, 'the count starts again after a sweep');
  limiter.hit('f', 10, 1_000);
  t.equal(limiter.size(), 3);
});

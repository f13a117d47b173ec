import t from 'tap';
import { ManualClock, sleep, systemClock } from '../../runtime/clock.ts';

t.test('a manual clock fires due timers in time order as it advances', async (t) => {
  const clock = new ManualClock(1_000);
  const fired: string[] = [];
  clock.setTimer(() => fired.push('b'), 200);
  clock.setTimer(() => fired.push('a'), 100);
  const cancelled = clock.setTimer(() => fired.push('never'), 150);
  cancelled.cancel();
  clock.advance(99);
  t.same(fired, []);
  clock.advance(101);
  t.same(fired, ['a', 'b']);
  t.equal(clock.now(), 1_200);
  t.equal(clock.pendingTimers(), 0);
});

t.test('a timer set by a firing timer fires in the same advance when due', async (t) => {
  const clock = new ManualClock(0);
  const at: number[] = [];
  const tick = () => {
    at.push(clock.now());
    if (at.length < 3) clock.setTimer(tick, 10);
  };
  clock.setTimer(tick, 10);
  clock.advance(100);
  t.same(at, [10, 20, 30]);
});

t.test('sleep on a manual clock resolves when the clock is advanced that far, not before', async (t) => {
  const clock = new ManualClock(0);
  let woke = false;
  const slept = sleep(clock, 50).then(() => {
    woke = true;
  });
  clock.advance(49);
  await Promise.resolve();
  t.notOk(woke, 'not woken 1 ms early');
  clock.advance(1);
  await slept;
  t.ok(woke);
  t.equal(clock.now(), 50);
});

t.test('sleep on the system clock waits at least its delay', async (t) => {
  const started = performance.now();
  await sleep(systemClock, 20);
  t.ok(performance.now() - started >= 19, 'not earlier than asked (timer granularity aside)');
});

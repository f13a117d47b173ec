import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';

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

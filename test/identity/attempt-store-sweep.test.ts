import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { AttemptContentionError, MemoryAttemptStore, type AttemptRecord } from '../../http/auth/attempt-store.ts';

const countUp = (now: number) => (current: AttemptRecord | undefined) => ({ next: { count: (current?.count ?? 0) + 1, last: now }, result: undefined });

t.test('the memory store sweeps expired records every sweepEvery new keys; updates of a held key do not count', async (t) => {
  const clock = new ManualClock();
  const store = new MemoryAttemptStore(clock, 3);
  await store.update('a', 1_000, countUp(clock.now()));
  clock.advance(1_000); // a has expired
  await store.update('b', 60_000, countUp(clock.now()));
  await store.update('b', 60_000, countUp(clock.now()));
  await store.update('b', 60_000, countUp(clock.now()));
  t.equal(store.size(), 2, 'two new keys, however often updated: no sweep yet');
  await store.update('c', 60_000, countUp(clock.now()));
  t.equal(store.size(), 2, 'the third new key sweeps the expired one and keeps the live ones');
  clock.advance(60_000); // b and c have expired
  await store.update('d', 1_000, countUp(clock.now()));
  await store.update('e', 1_000, countUp(clock.now()));
  t.equal(store.size(), 4, 'the count starts again after a sweep');
  await store.update('f', 1_000, countUp(clock.now()));
  t.equal(store.size(), 3, 'the third new key after it sweeps again');
});

t.test('by default the memory store sweeps every 4096 new keys', async (t) => {
  const clock = new ManualClock();
  const store = new MemoryAttemptStore(clock);
  for (let i = 0; i < 4095; i++) await store.update(`k${i}`, 1_000, countUp(clock.now()));
  clock.advance(1_000);
  t.equal(store.size(), 4095);
  await store.update('last', 1_000, countUp(clock.now()));
  t.equal(store.size(), 1);
});

t.test('the contention error names its key', async (t) => {
  const error = new AttemptContentionError('login:1.2.3.4|a@x');
  t.equal(error.message, 'too many concurrent changes of login:1.2.3.4|a@x');
  t.equal(error.name, 'AttemptContentionError');
  t.ok(error instanceof Error);
});

import t from 'tap';
import { Lru } from '../../runtime/lru.ts';

/** The keys an Lru holds, by asking for each one it may hold (a hit of an old entry moves it, as any read would). */
const present = (lru: Lru<string, number>, keys: string[]) => keys.filter((key) => lru.get(key) !== undefined);

t.test('a full map evicts the least recently used entry, not the oldest one', async (t) => {
  const lru = new Lru<string, number>(4);
  for (const [i, key] of ['a', 'b', 'c', 'd'].entries()) lru.set(key, i);
  t.equal(lru.get('a'), 0, 'a, the first one set, is read');
  lru.set('e', 4);
  t.equal(lru.size, 4);
  t.equal(lru.get('b'), undefined, 'b, now the least recently used, is evicted');
  t.same([lru.get('a'), lru.get('c'), lru.get('d'), lru.get('e')], [0, 2, 3, 4], 'a, which was read, stays');
});

t.test('eviction follows use through a longer sequence', async (t) => {
  const lru = new Lru<string, number>(4);
  const evicted: string[] = [];
  const all = 'abcdefgh'.split('');
  const setAndSee = (key: string, value: number) => {
    const before = all.filter((k) => k !== key && has(k));
    lru.set(key, value);
    evicted.push(...before.filter((k) => !has(k)));
  };
  // Whether a key is held, without a read (which would move it): a Map keeps what `size` counts.
  const has = (key: string) => (lru as unknown as { map: Map<string, unknown> }).map.has(key);
  for (const [i, key] of ['a', 'b', 'c', 'd'].entries()) setAndSee(key, i);
  lru.get('a'); // order b c d a
  setAndSee('e', 4); // evicts b: c d a e
  lru.get('d'); // d was used 2 ticks ago (half the capacity): moves, c a e d
  setAndSee('f', 5); // evicts c
  setAndSee('g', 6); // evicts a
  lru.get('e'); // moves: d f g e
  setAndSee('h', 7); // evicts d
  t.same(evicted, ['b', 'c', 'a', 'd']);
  t.same(present(lru, all), ['e', 'f', 'g', 'h']);
});

t.test('setting a key again replaces its value, makes it the most recently used, and does not grow the map', async (t) => {
  const lru = new Lru<string, number>(3);
  lru.set('a', 1);
  lru.set('b', 2);
  lru.set('c', 3);
  lru.set('a', 10);
  t.equal(lru.size, 3);
  lru.set('d', 4);
  t.equal(lru.get('b'), undefined, 'b is the least recently used once a is set again');
  t.equal(lru.get('a'), 10, 'a holds its new value');
  t.same(present(lru, ['a', 'b', 'c', 'd']), ['a', 'c', 'd']);
});

t.test('a capacity of one keeps the last entry set', async (t) => {
  const lru = new Lru<string, number>(1);
  lru.set('a', 1);
  lru.set('b', 2);
  t.equal(lru.size, 1);
  t.equal(lru.get('a'), undefined);
  t.equal(lru.get('b'), 2);
});

t.test('delete and clear forget entries', async (t) => {
  const lru = new Lru<string, number>(3);
  lru.set('a', 1);
  lru.set('b', 2);
  lru.delete('a');
  t.equal(lru.get('a'), undefined);
  t.equal(lru.size, 1);
  lru.delete('missing');
  t.equal(lru.size, 1, 'deleting a key not held changes nothing');
  lru.clear();
  t.equal(lru.size, 0);
  t.equal(lru.get('b'), undefined);
});

t.test('under random use, the most recently used half of the capacity is always held', async (t) => {
  // A seeded generator (mulberry32): the same sequence on every run.
  let seed = 0x9e3779b9;
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 2 ** 32;
  };
  for (const max of [2, 5, 8, 16]) {
    const lru = new Lru<number, number>(max);
    const values = new Map<number, number>();
    const held = (key: number) => (lru as unknown as { map: Map<number, unknown> }).map.has(key);
    let recency: number[] = []; // the keys held, most recently set or read last
    const lost: string[] = [];
    for (let step = 0; step < 4000; step++) {
      const key = Math.floor(random() * max * 3);
      if (random() < 0.5) {
        lru.set(key, step);
        values.set(key, step);
        recency = [...recency.filter((k) => k !== key), key];
      } else {
        const got = lru.get(key);
        if (got !== undefined && got !== values.get(key)) lost.push(`step ${step}: ${key} read ${got}, was set to ${values.get(key)}`);
        if (got !== undefined) recency = [...recency.filter((k) => k !== key), key];
      }
      for (const recent of recency.slice(-Math.max(1, max >> 1))) if (!held(recent)) lost.push(`step ${step}: ${recent} evicted`);
      if (lru.size > max) lost.push(`step ${step}: size ${lru.size}`);
      recency = recency.filter(held);
    }
    t.same(lost.slice(0, 5), [], `capacity ${max}: nothing recent is lost, nothing read is stale, the size stays bounded`);
  }
});

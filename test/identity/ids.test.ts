import t from 'tap';
import { idTime, newId } from '../../persistence/ids.ts';

t.test('ids are prefixed, 26 characters of lower-case Crockford base32, and carry their time', async (t) => {
  const at = Date.UTC(2030, 5, 1, 12, 0, 0);
  const id = newId('usr', at + 10_000_000_000);
  t.match(id, /^usr_[0-9a-hjkmnp-tv-z]{26}$/);
  t.equal(idTime(id), at + 10_000_000_000);
});

t.test('ids made later sort after earlier ones, also within one millisecond and when the clock steps back', async (t) => {
  const ids: string[] = [];
  const base = Date.UTC(2040, 0, 1);
  for (let i = 0; i < 1000; i++) ids.push(newId('key', base + Math.floor(i / 100)));
  ids.push(newId('key', base - 60_000));
  const sorted = [...ids].sort();
  t.same(sorted, ids, 'text order is creation order');
  t.equal(new Set(ids).size, ids.length, 'no duplicates');
});

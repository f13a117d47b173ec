import t from 'tap';
import { IDEMPOTENCY_CACHE_MAX, IdempotencyCache } from '../../actors/workspace/idempotency-cache.ts';
import type { GenerationRow } from '../../persistence/entities/generation.ts';

const DAY = 24 * 3_600_000;
const result = (id: string) => ({ status: 201, generation: { id } as GenerationRow });

t.test('a busy workspace keeps at most IDEMPOTENCY_CACHE_MAX completed keys, the most recently used', async (t) => {
  const cache = new IdempotencyCache();
  const now = 1_000;
  const creates = IDEMPOTENCY_CACHE_MAX * 40;
  for (let i = 0; i < creates; i++) {
    cache.begin(`k${i}`, `h${i}`, now + DAY);
    cache.remember(`k${i}`, { hash: `h${i}`, expiresAt: now + DAY, result: result(`gen_${i}`) });
    if (i % 97 === 0) cache.get('k0', now); // a key retried now and then stays
  }
  t.same(cache.size, { pending: 0, done: IDEMPOTENCY_CACHE_MAX }, `${creates} creates leave ${IDEMPOTENCY_CACHE_MAX} keys in memory`);
  t.equal(cache.get(`k${creates - 1}`, now)?.result?.generation.id, `gen_${creates - 1}`, 'the newest key is there');
  t.equal(cache.get('k0', now)?.result?.generation.id, 'gen_0', 'a key in use is kept');
  t.equal(cache.get('k1', now), undefined, 'an old key is forgotten (the database still has it)');
});

t.test('keys of creates in flight are never evicted, however many completed keys come after them', async (t) => {
  const cache = new IdempotencyCache(8);
  cache.begin('in-flight', 'h', DAY);
  for (let i = 0; i < 100; i++) cache.remember(`k${i}`, { hash: 'h', expiresAt: DAY, result: result(`gen_${i}`) });
  t.same(cache.size, { pending: 1, done: 8 });
  t.same(cache.get('in-flight', 0), { hash: 'h', expiresAt: DAY }, 'still known as in flight: a second request with it is a conflict');
  cache.remember('in-flight', { hash: 'h', expiresAt: DAY, result: result('gen_x') });
  t.same(cache.size, { pending: 0, done: 8 }, 'once committed it is an ordinary completed key');
  cache.begin('failed', 'h', DAY);
  cache.forget('failed');
  t.same(cache.size, { pending: 0, done: 8 });
  t.equal(cache.get('failed', 0), undefined);
});

t.test('an expired key is dropped when read', async (t) => {
  const cache = new IdempotencyCache(8);
  cache.remember('k', { hash: 'h', expiresAt: 100, result: result('gen_1') });
  t.ok(cache.get('k', 99));
  t.equal(cache.get('k', 100), undefined);
  t.same(cache.size, { pending: 0, done: 0 });
});

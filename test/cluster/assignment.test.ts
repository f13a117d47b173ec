import t from 'tap';
import { assignShards } from '../../runtime/cluster/assignment.ts';
import { DEFAULT_SHARD_COUNT, shardOf } from '../../runtime/cluster/shard.ts';

const countBy = (targets: (string | undefined)[]) => {
  const counts = new Map<string, number>();
  for (const node of targets) if (node !== undefined) counts.set(node, (counts.get(node) ?? 0) + 1);
  return Object.fromEntries([...counts].sort(([a], [b]) => (a < b ? -1 : 1)));
};
const moved = (owners: (string | undefined)[], targets: (string | undefined)[]) => targets.filter((node, shard) => node !== owners[shard]).length;

/** A deterministic pseudo-random sequence (mulberry32), so the property test is the same on every run. */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.test('no live node: no shard has a target; one node: it gets every shard', async (t) => {
  t.same(assignShards(4, [], ['a', undefined, 'b', 'a']), [undefined, undefined, undefined, undefined]);
  t.same(assignShards(4, ['a'], [undefined, 'gone', 'a', undefined]), ['a', 'a', 'a', 'a']);
});

t.test('64 shards over 3 fresh nodes: 22, 21, 21, whatever order the nodes are listed in', async (t) => {
  const none = Array.from({ length: 64 }, () => undefined);
  const targets = assignShards(64, ['c', 'a', 'b'], none);
  t.same(countBy(targets), { a: 22, b: 21, c: 21 });
  t.same(assignShards(64, ['b', 'c', 'a'], none), targets, 'every node computes the same answer');
  t.same(assignShards(64, ['a', 'b', 'c'], targets), targets, 'an assignment in place stays as it is');
});

t.test('a node joining takes only its share, from the fullest; a node leaving spreads only its own shards', async (t) => {
  const three = assignShards(
    64,
    ['a', 'b', 'c'],
    Array.from({ length: 64 }, () => undefined),
  );
  const four = assignShards(64, ['a', 'b', 'c', 'd'], three);
  t.same(countBy(four), { a: 16, b: 16, c: 16, d: 16 });
  t.equal(moved(three, four), 16, "exactly the new node's share moves");
  t.ok(
    four.every((node, shard) => node === 'd' || node === three[shard]),
    'nothing moves between the old nodes',
  );

  const owners = three.map((node) => (node === 'b' ? undefined : node));
  const two = assignShards(64, ['a', 'c'], owners);
  t.same(countBy(two), { a: 32, c: 32 });
  t.ok(
    two.every((node, shard) => owners[shard] === undefined || node === owners[shard]),
    'survivors keep what they had',
  );
});

t.test('property: always an even spread over live nodes, with the fewest moves possible', async (t) => {
  const next = random(42);
  const pool = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'dead1', 'dead2'];
  for (let round = 0; round < 500; round++) {
    const shardCount = 1 + Math.floor(next() * 100);
    const live = pool.slice(0, 7).filter(() => next() < 0.6);
    const owners = Array.from({ length: shardCount }, () => (next() < 0.2 ? undefined : pool[Math.floor(next() * pool.length)]));
    const targets = assignShards(shardCount, live, owners);
    if (live.length === 0) {
      if (targets.some((node) => node !== undefined)) t.fail('targets without live nodes');
      continue;
    }
    const counts = live.map((node) => targets.filter((target) => target === node).length);
    if (targets.some((node) => node === undefined || !live.includes(node))) t.fail(`round ${round}: a shard without a live target`);
    if (Math.max(...counts) - Math.min(...counts) > 1) t.fail(`round ${round}: uneven ${counts}`);

    // The most any even spread can leave in place: each node keeps up to ⌊S/N⌋, and S mod N of the nodes
    // that hold more keep one more.
    const base = Math.floor(shardCount / live.length);
    const held = live.map((node) => owners.filter((owner) => owner === node).length);
    const maxKept = held.reduce((sum, h) => sum + Math.min(h, base), 0) + Math.min(shardCount % live.length, held.filter((h) => h > base).length);
    const kept = targets.filter((node, shard) => node === owners[shard]).length;
    if (kept !== maxKept) t.fail(`round ${round}: kept ${kept}, could keep ${maxKept}`);
  }
  t.pass('500 random cases');
});

t.test('shardOf: SHA-256 of the id, first four bytes, modulo the count; stable and evenly spread', async (t) => {
  t.equal(DEFAULT_SHARD_COUNT, 64);
  t.equal(shardOf('abc', 64), 3128432319 % 64, 'pinned: a change would move every workspace to another shard');
  t.equal(shardOf('abc', 1), 0);
  t.equal(shardOf('ws_01J00000000000000000000000', 64), shardOf('ws_01J00000000000000000000000', 64));
  const counts = new Array<number>(64).fill(0);
  for (let i = 0; i < 64_000; i++) counts[shardOf(`ws_${i}`, 64)]!++;
  t.ok(Math.min(...counts) > 850 && Math.max(...counts) < 1150, `1000 ± 15% per shard: ${Math.min(...counts)}..${Math.max(...counts)}`);
  t.throws(() => shardOf('x', 0), RangeError);
});

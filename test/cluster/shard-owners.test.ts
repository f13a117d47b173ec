import t from 'tap';
import { EventEmitter } from 'node:events';
import { ManualClock } from '../../runtime/clock.ts';
import type { ShardOwnerRow } from '../../persistence/cluster/leases.ts';
import type { ClusterNode, KnownOwner } from '../../runtime/cluster/cluster-node.ts';
import { ShardOwners } from '../../runtime/cluster/shard-owners.ts';

/** A lookup standing in for the database: answers from `table`, counts its reads, and can be held back. */
function fakeLookup(table: Map<number, ShardOwnerRow>) {
  const reads: number[] = [];
  let gate: Promise<void> | undefined;
  const lookup = async (shard: number) => {
    reads.push(shard);
    const answer = table.get(shard);
    if (gate) await gate;
    return answer === undefined ? undefined : { ...answer };
  };
  const hold = () => {
    let open!: () => void;
    gate = new Promise((resolve) => {
      open = resolve;
    });
    return () => {
      gate = undefined;
      open();
    };
  };
  return { lookup, reads, hold };
}

const row = (nodeId: string, epoch: number, remainingMs = 5_000): ShardOwnerRow => ({ nodeId, address: `${nodeId}.internal:8081`, epoch, remainingMs });
const known = (clock: ManualClock, entries: Array<[number, string, number, number?]>): Map<number, KnownOwner> =>
  new Map(
    entries.map(([shard, nodeId, epoch, validMs = 5_000]) => [shard, { nodeId, address: `${nodeId}.internal:8081`, epoch, validUntil: clock.now() + validMs }]),
  );

t.test("a round's view answers without reading; an unknown shard is read once and then remembered", async (t) => {
  const clock = new ManualClock();
  const db = fakeLookup(new Map([[7, row('c', 4)]]));
  const owners = new ShardOwners(db.lookup, clock);
  owners.replace(
    known(clock, [
      [1, 'a', 2],
      [2, 'b', 3],
    ]),
  );
  t.same(await owners.ownerOf(1), { nodeId: 'a', address: 'a.internal:8081', epoch: 2, validUntil: clock.now() + 5_000 });
  t.equal((await owners.ownerOf(2))!.nodeId, 'b');
  t.same(db.reads, [], 'no database read for a shard the round saw');

  t.same(await owners.ownerOf(7), { nodeId: 'c', address: 'c.internal:8081', epoch: 4 });
  t.equal((await owners.ownerOf(7))!.nodeId, 'c');
  t.same(db.reads, [7], 'read once, then from memory');
});

t.test('a shard without a live owner is not remembered: each request looks again', async (t) => {
  const clock = new ManualClock();
  const table = new Map<number, ShardOwnerRow>();
  const db = fakeLookup(table);
  const owners = new ShardOwners(db.lookup, clock);
  t.equal(await owners.ownerOf(3), undefined);
  t.equal(await owners.ownerOf(3), undefined);
  t.same(db.reads, [3, 3]);
  table.set(3, row('b', 9));
  t.equal((await owners.ownerOf(3))!.nodeId, 'b', 'the new owner is found as soon as it holds the lease');
});

t.test('an entry is trusted only while its lease, as read, still runs', async (t) => {
  const clock = new ManualClock();
  const db = fakeLookup(new Map([[1, row('b', 6, 2_000)]]));
  const owners = new ShardOwners(db.lookup, clock);
  owners.replace(known(clock, [[1, 'a', 5, 3_000]]));
  clock.advance(2_999);
  t.equal((await owners.ownerOf(1))!.nodeId, 'a');
  t.same(db.reads, []);
  clock.advance(1);
  t.equal((await owners.ownerOf(1))!.nodeId, 'b', 'past its lease: read again');
  t.same(db.reads, [1]);
  clock.advance(1_999);
  t.equal((await owners.ownerOf(1))!.nodeId, 'b');
  t.same(db.reads, [1], 'the entry read lasts as long as the lease the read saw');
  clock.advance(1);
  await owners.ownerOf(1);
  t.same(db.reads, [1, 1]);
});

t.test('forget drops the entry only if it still names that node; the next request reads the database', async (t) => {
  const clock = new ManualClock();
  const table = new Map([[1, row('b', 6)]]);
  const db = fakeLookup(table);
  const owners = new ShardOwners(db.lookup, clock);
  owners.replace(known(clock, [[1, 'a', 5]]));
  owners.forget(1, 'c');
  t.equal((await owners.ownerOf(1))!.nodeId, 'a', 'a failure at another node leaves the entry alone');
  owners.forget(1, 'a');
  t.equal((await owners.ownerOf(1))!.nodeId, 'b', 'dropped: the database names the new owner');
  t.same(db.reads, [1]);
  owners.forget(1);
  await owners.ownerOf(1);
  t.same(db.reads, [1, 1], 'forget without a node id drops whatever is known');
});

t.test('concurrent requests for an unknown shard share one read', async (t) => {
  const clock = new ManualClock();
  const db = fakeLookup(new Map([[4, row('b', 2)]]));
  const owners = new ShardOwners(db.lookup, clock);
  const release = db.hold();
  const answers = Promise.all([owners.ownerOf(4), owners.ownerOf(4), owners.ownerOf(4)]);
  release();
  t.same(
    (await answers).map((o) => o?.nodeId),
    ['b', 'b', 'b'],
  );
  t.same(db.reads, [4]);
});

t.test('a read begun before a newer view or a forget does not write over it', async (t) => {
  const clock = new ManualClock();
  const table = new Map([[5, row('old', 1)]]);
  const db = fakeLookup(table);
  const owners = new ShardOwners(db.lookup, clock);

  let release = db.hold();
  const early = owners.ownerOf(5);
  owners.replace(known(clock, [[5, 'new', 2]]));
  release();
  t.equal((await early)!.nodeId, 'old', 'the read answers its own caller');
  t.equal((await owners.ownerOf(5))!.nodeId, 'new', "the round's newer view is kept");
  t.same(db.reads, [5]);

  owners.forget(5, 'new');
  release = db.hold();
  const stale = owners.ownerOf(5);
  owners.forget(5, 'old');
  table.set(5, row('newest', 3));
  const fresh = owners.ownerOf(5);
  release();
  t.equal((await stale)!.nodeId, 'old');
  t.equal((await fresh)!.nodeId, 'newest', 'a request after the forget does not join the read begun before it');
  t.equal((await owners.ownerOf(5))!.nodeId, 'newest');
  t.same(db.reads, [5, 5, 5]);
});

t.test('a failed read fails its requests and is not remembered', async (t) => {
  const clock = new ManualClock();
  let down = true;
  const owners = new ShardOwners(async () => {
    if (down) throw new Error('database unreachable');
    return row('a', 1);
  }, clock);
  await t.rejects(Promise.resolve(owners.ownerOf(1)), /database unreachable/);
  down = false;
  t.equal((await owners.ownerOf(1))!.nodeId, 'a');
});

t.test('attached to a node: each round replaces the view, and a shard this node loses is forgotten', async (t) => {
  const clock = new ManualClock();
  const db = fakeLookup(new Map([[1, row('b', 8)]]));
  const owners = new ShardOwners(db.lookup, clock);
  const node = new EventEmitter() as unknown as ClusterNode;
  owners.attach(node);
  node.emit(
    'owners',
    known(clock, [
      [1, 'me', 7],
      [2, 'c', 1],
    ]),
  );
  t.equal((await owners.ownerOf(1))!.nodeId, 'me');
  node.emit('lost', { shard: 1, epoch: 7 }, 'handed-over');
  t.equal((await owners.ownerOf(1))!.nodeId, 'b', 'handed over: its next owner is read');
  node.emit('owners', known(clock, [[2, 'c', 1]]));
  t.equal(owners.size, 1, "a round's view replaces all that was known");
});

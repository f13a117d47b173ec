import t, { type Test } from 'tap';
import type { Database } from '../../persistence/database.ts';
import { fenceShards, FencedOutError, listLeases, listMembers, type Lease } from '../../persistence/cluster/index.ts';
import { ClusterNode, type ClusterNodeOptions, type KnownOwner, type ShardLossReason } from '../../runtime/cluster/cluster-node.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { clusterDatabase, eventually, NEEDS_POSTGRES, sleep } from './support.ts';

// Generous against a loaded machine (a node starved of CPU past its dead-after time is rightly expelled, which these tests do not expect).
const TIMINGS = { heartbeatMs: 200, deadAfterMs: 2500, leaseMs: 2000, shardCount: 64 };

interface Watched {
  node: ClusterNode;
  gained: Lease[];
  lost: { lease: Lease; reason: ShardLossReason }[];
}

function makeNode(t: Test, db: Database, nodeId: string, over: Partial<ClusterNodeOptions> = {}): Watched {
  const node = new ClusterNode({ db, nodeId, address: `127.0.0.1:${9000 + nodeId.charCodeAt(0)}`, ...TIMINGS, ...over });
  const watched: Watched = { node, gained: [], lost: [] };
  node.on('gained', (lease) => watched.gained.push(lease));
  node.on('lost', (lease, reason) => watched.lost.push({ lease, reason }));
  t.teardown(() => node.stop());
  return watched;
}

/** Valid owners per node in the lease table, e.g. { a: 22, b: 21, c: 21 }. */
async function _ownerCounts(db: Database): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const row of await listLeases(db.em())) if (row.valid) counts[row.ownerNodeId!] = (counts[row.ownerNodeId!] ?? 0) + 1;
  return counts;
}

/**
 * Resolves once the table's owners are `expected` and every node's own view matches the table.
 * `beforeEachLook` runs before each look (a node without its own timer ticks there).
 */
async function converged(db: Database, nodes: ClusterNode[], expected: (counts: number[]) => boolean, beforeEachLook?: () => Promise<unknown>) {
  return eventually('the shards to settle', async () => {
    await beforeEachLook?.();
    const rows = (await listLeases(db.em())).filter((row) => row.valid);
    const counts = nodes.map((node) => rows.filter((row) => row.ownerNodeId === node.nodeId).length);
    if (!expected(counts)) return undefined;
    for (const node of nodes) {
      const mine = rows.filter((row) => row.ownerNodeId === node.nodeId).map((row) => `${row.shard}@${row.epoch}`);
      const seen = node.ownedShards().map((lease) => `${lease.shard}@${lease.epoch}`);
      if (mine.join() !== seen.join()) return undefined;
    }
    return counts;
  });
}

t.test('three nodes spread 64 shards evenly; a graceful stop drains and hands its shards to the others', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  const drained: Lease[] = [];
  const a = makeNode(t, db, 'a');
  const b = makeNode(t, db, 'b');
  const c = makeNode(t, db, 'c', {
    drain: async (lease) => {
      drained.push(lease);
    },
  });
  await Promise.all([a.node.start(), b.node.start(), c.node.start()]);
  const counts = await converged(db, [a.node, b.node, c.node], (n) => n.reduce((x, y) => x + y) === 64 && Math.max(...n) - Math.min(...n) <= 1);
  t.same([...counts].sort(), [21, 21, 22]);
  t.same(
    (await listMembers(db.em())).map((m) => [m.nodeId, m.status]).sort(),
    [
      ['a', 'up'],
      ['b', 'up'],
      ['c', 'up'],
    ],
    'the three are members, up',
  );
  for (const w of [a, b, c]) {
    const gainedNow = w.gained.filter((g) => !w.lost.some((l) => l.lease.shard === g.shard && l.lease.epoch === g.epoch));
    t.same(
      gainedNow.map((g) => g.shard).sort((x, y) => x - y),
      w.node.ownedShards().map((l) => l.shard),
      `${w.node.nodeId}: a gained event for each shard it holds`,
    );
  }

  drained.length = 0;
  const leaving = c.node.ownedShards();
  // Shards c gave up earlier (while the three settled) are not part of its stop.
  const lostBefore = c.lost.length;
  await c.node.stop();
  t.equal(c.node.status, 'stopped');
  t.same(c.node.ownedShards(), []);
  t.same(
    drained.map((l) => l.shard).sort((x, y) => x - y),
    leaving.map((l) => l.shard),
    'each shard drained before it was given up',
  );
  const lostInStop = c.lost.slice(lostBefore).filter((l) => leaving.some((s) => s.shard === l.lease.shard));
  t.ok(lostInStop.length === leaving.length && lostInStop.every((l) => l.reason === 'handed-over'), 'handed over, not dropped');
  t.same((await listMembers(db.em())).map((m) => m.nodeId).sort(), ['a', 'b'], 'its member row is gone');
  const rows = await listLeases(db.em());
  for (const lease of leaving) {
    const row = rows.find((r) => r.shard === lease.shard)!;
    if (!(row.valid && ['a', 'b'].includes(row.ownerNodeId!) && row.epoch === lease.epoch + 1))
      t.fail(`shard ${lease.shard} was not handed over: ${JSON.stringify(row)}`);
  }
  t.same([...(await converged(db, [a.node, b.node], (n) => n[0] === 32 && n[1] === 32))], [32, 32], 'the survivors adopt them: 32 each');
});

t.test('a renewal that missed shards just handed over: they are reported handed over, not lost', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  // b's handovers reach it late: each committed in the database, its answer held 300 ms. A round run
  // meanwhile renews b's leases and finds those shards no longer b's, before b hears that it handed them over.
  let stopping = false;
  let committed!: () => void;
  const handedOver = new Promise<void>((resolve) => {
    committed = resolve;
  });
  const lateHandovers = {
    em: () =>
      new Proxy(db.em(), {
        get(target, name, receiver) {
          if (name !== 'execute') return Reflect.get(target, name, receiver);
          return async (sql: string, ...rest: unknown[]) => {
            const result = await (target.execute as (...args: unknown[]) => Promise<unknown>)(sql, ...rest);
            if (stopping && /epoch = l\.epoch \+ 1/.test(sql)) {
              committed();
              await sleep(300);
            }
            return result;
          };
        },
      }),
  };
  const a = makeNode(t, db, 'a');
  const b = makeNode(t, lateHandovers as unknown as Database, 'b', { autoTick: false });
  await Promise.all([a.node.start(), b.node.start()]);
  // b has no timer of its own: it takes its share (or hands a its own) over as many rounds as that needs.
  await converged(
    db,
    [a.node, b.node],
    (n) => n[0] === 32 && n[1] === 32,
    () => b.node.tick(),
  );
  const leaving = b.node.ownedShards();
  const lostBefore = b.lost.length;
  stopping = true;
  const stopped = b.node.stop();
  await handedOver;
  await b.node.tick();
  await stopped;
  const reasons: Record<string, number> = {};
  for (const { reason } of b.lost.slice(lostBefore)) reasons[reason] = (reasons[reason] ?? 0) + 1;
  t.same(reasons, { 'handed-over': leaving.length }, 'each of its 32 shards handed over, none reported lost');
  const rows = await listLeases(db.em());
  t.ok(
    leaving.every((lease) => rows.find((r) => r.shard === lease.shard)?.ownerNodeId === 'a'),
    'a holds them all',
  );
});

t.test('a node joining takes its even share from the others, with one handover per moved shard', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  const a = makeNode(t, db, 'a');
  const b = makeNode(t, db, 'b');
  await Promise.all([a.node.start(), b.node.start()]);
  await converged(db, [a.node, b.node], (n) => n[0] === 32 && n[1] === 32);
  const before = new Map((await listLeases(db.em())).map((row) => [row.shard, row]));
  const c = makeNode(t, db, 'c');
  await c.node.start();
  const counts = await converged(db, [a.node, b.node, c.node], (n) => n.reduce((x, y) => x + y) === 64 && Math.max(...n) - Math.min(...n) <= 1);
  t.equal(counts[2], 21, 'the newcomer gets 21');
  const moved = (await listLeases(db.em())).filter((row) => row.ownerNodeId !== before.get(row.shard)!.ownerNodeId);
  t.equal(moved.length, 21, 'only its share moved');
  t.ok(
    moved.every((row) => row.ownerNodeId === 'c' && row.epoch === before.get(row.shard)!.epoch + 1),
    'each moved once, straight to it',
  );
});

t.test("each round reports every shard's owner as read, with its address and epoch, for routing", { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  const a = makeNode(t, db, 'a');
  const b = makeNode(t, db, 'b');
  let seen: ReadonlyMap<number, KnownOwner> = new Map();
  a.node.on('owners', (owners) => {
    seen = owners;
  });
  await Promise.all([a.node.start(), b.node.start()]);
  await converged(db, [a.node, b.node], (n) => n[0] === 32 && n[1] === 32);
  const matchesTable = async () => {
    const rows = (await listLeases(db.em())).filter((row) => row.valid);
    const expected = rows.map((row) => `${row.shard}:${row.ownerNodeId}@${row.epoch}:127.0.0.1:${9000 + row.ownerNodeId!.charCodeAt(0)}`);
    const reported = [...seen].sort(([x], [y]) => x - y).map(([shard, o]) => `${shard}:${o.nodeId}@${o.epoch}:${o.address}`);
    return rows.length === 64 && reported.join() === expected.join() ? reported : undefined;
  };
  await eventually('a round to report the table', matchesTable);
  t.ok(
    [...seen.values()].every((o) => o.validUntil > Date.now() && o.validUntil <= Date.now() + TIMINGS.leaseMs),
    'each known until its lease would expire',
  );

  await b.node.stop();
  await converged(db, [a.node], (n) => n[0] === 64);
  const after = await eventually('a round to report the handover', matchesTable);
  t.ok(
    after.every((line) => line.includes(':a@')),
    'every shard reported at a once b left',
  );
});

t.test('a paused node (its rounds and clock stopped past its lease) cannot commit a fenced write; it then rejoins', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  await db.em().execute('create table fenced_writes (id serial primary key, node_id text not null, shard integer not null, epoch bigint not null)');
  const frozen = new ManualClock();
  const zombie = makeNode(t, db, 'z', { clock: frozen, autoTick: false });
  const expelled: string[] = [];
  zombie.node.on('expelled', () => expelled.push('z'));
  await zombie.node.start();
  t.equal(zombie.node.ownedShards().length, 64, 'alone, it takes every shard');

  const other = makeNode(t, db, 'o');
  await other.node.start();
  // z does not run a round again: to itself (its clock stopped too) it still owns everything.
  await converged(db, [other.node], (n) => n[0] === 64);
  const stale = zombie.node.owns(3)!;
  t.ok(stale, 'the paused node still believes it owns shard 3');

  const attempt = await db
    .em()
    .transactional(async (tx) => {
      await tx.execute('insert into fenced_writes (node_id, shard, epoch) values (?, ?, ?)', ['z', stale.shard, stale.epoch]);
      await fenceShards(tx, 'z', [stale], { holdLimitMs: 5000 });
    })
    .catch((error: unknown) => error);
  t.ok(attempt instanceof FencedOutError, 'its write is fenced out');
  t.same(await db.em().execute('select * from fenced_writes'), [], 'and nothing it wrote remains');

  // It resumes: its next round finds itself declared dead, drops every shard, and rejoins as a new incarnation.
  await zombie.node.tick();
  t.same(expelled, ['z']);
  t.same(zombie.node.ownedShards(), []);
  t.ok(zombie.lost.length === 64 && zombie.lost.every((l) => l.reason === 'expelled'));
  frozen.advance(10);
  await eventually('the rejoined node to get its share back', async () => {
    await zombie.node.tick();
    return zombie.node.ownedShards().length === 32 ? true : undefined;
  });
  t.ok(
    zombie.node.ownedShards().every((lease) => lease.epoch >= 3),
    'at new epochs (taken at 2, handed back at 3)',
  );
});

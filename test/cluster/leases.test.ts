import t, { type Test } from 'tap';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import {
  acquireShards,
  declareDead,
  fenceShards,
  FencedOutError,
  handOverShard,
  heartbeat,
  joinCluster,
  leaveCluster,
  listLeases,
  listActiveMembers,
  listLiveMembers,
  listMembers,
  ownerAddressOf,
  purgeDead,
  releaseShard,
  renewLeases,
  setMemberStatus,
  type Lease,
  type MemberIdentity,
} from '../../persistence/cluster/index.ts';
import { clusterDatabase, eventually, NEEDS_POSTGRES } from './support.ts';

const me = (nodeId: string, incarnation = `${nodeId}-1`): MemberIdentity => ({ nodeId, incarnation });

t.test('membership: join, heartbeat, up, declared dead when silent, leave', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  const em = db.em();
  const a = me('a');
  const b = me('b');
  t.equal((await joinCluster(em, { ...a, address: '10.0.0.1:8081' })).status, 'joining');
  await joinCluster(em, { ...b, address: '10.0.0.2:8081' });
  t.equal(await heartbeat(em, a), 'joining');
  t.same(await listLiveMembers(em), [], 'joining members get no shard');
  t.ok(await setMemberStatus(em, a, 'up'));
  t.ok(await setMemberStatus(em, b, 'up'));
  t.same(
    (await listLiveMembers(em)).map((m) => m.nodeId),
    ['a', 'b'],
  );

  // b falls silent: its last heartbeat is ten seconds old by the database's clock.
  await em.execute(`update cluster_members set heartbeat_at = clock_timestamp() - interval '10 seconds' where node_id = ?`, ['b']);
  t.same(await declareDead(em, 60_000), [], 'not silent for a minute');
  t.same(
    (await listLiveMembers(em)).map((m) => m.nodeId),
    ['a', 'b'],
    'live until declared dead',
  );
  t.same(await declareDead(em, 5000), ['b']);
  t.same(
    (await listLiveMembers(em)).map((m) => m.nodeId),
    ['a'],
  );
  t.same(await declareDead(em, 5000), [], 'declared once');
  t.equal(await heartbeat(em, b), undefined, 'a dead member cannot heartbeat its way back');
  t.notOk(await setMemberStatus(em, b, 'up'));
  const members = await listMembers(em);
  t.same(
    members.map((m) => [m.nodeId, m.status]),
    [
      ['a', 'up'],
      ['b', 'dead'],
    ],
  );
  t.ok(members[1]!.silentMs >= 10_000);

  // The same id joining again is a new incarnation: the old one is out.
  const b2 = me('b', 'b-2');
  await joinCluster(em, { ...b2, address: '10.0.0.2:8081', status: 'up' });
  t.equal(await heartbeat(em, b2), 'up');
  t.equal(await heartbeat(em, b), undefined, 'the previous incarnation is no longer the member');

  await em.execute(`update cluster_members set status = 'dead', heartbeat_at = clock_timestamp() - interval '2 hours' where node_id = ?`, ['b']);
  t.equal(await purgeDead(em, 3_600_000), 1);
  await leaveCluster(em, a);
  t.same(await listMembers(em), []);
});

t.test(
  'leases: acquire free or expired shards at the next epoch, renew only as owner at the same epoch, release, hand over',
  { skip: NEEDS_POSTGRES },
  async (t) => {
    const db = await clusterDatabase(t);
    const em = db.em();
    const a = me('a');
    const b = me('b');
    const c = me('c');
    for (const m of [a, b]) await joinCluster(em, { ...m, address: 'x', status: 'up' });
    await joinCluster(em, { ...c, address: 'x', status: 'joining' });

    t.same(await acquireShards(em, a, [2, 0, 1, 1], 60_000), [
      { shard: 0, epoch: 1 },
      { shard: 1, epoch: 1 },
      { shard: 2, epoch: 1 },
    ]);
    t.same(await acquireShards(em, b, [1, 2, 3], 60_000), [{ shard: 3, epoch: 1 }], 'held shards are not taken');
    t.same(
      await renewLeases(
        em,
        a,
        [
          { shard: 0, epoch: 1 },
          { shard: 1, epoch: 7 },
          { shard: 3, epoch: 1 },
        ],
        60_000,
      ),
      [{ shard: 0, epoch: 1 }],
      'only the owner renews, and only at its epoch',
    );

    // Shard 0's lease runs out: anyone may take it, at epoch 2; its old owner can no longer renew it.
    await em.execute(`update cluster_shard_leases set expires_at = clock_timestamp() - interval '1 second' where shard = 0`);
    t.same(await renewLeases(em, a, [{ shard: 0, epoch: 1 }], 60_000), [], 'an expired lease is not renewed');
    t.same(await acquireShards(em, b, [0], 60_000), [{ shard: 0, epoch: 2 }]);
    t.notOk(await releaseShard(em, a, { shard: 0, epoch: 1 }), 'a lost lease cannot be released either');

    t.ok(await releaseShard(em, a, { shard: 1, epoch: 1 }));
    t.same(await acquireShards(em, b, [1], 60_000), [{ shard: 1, epoch: 2 }], 'a released shard is taken at the next epoch');

    t.equal(await handOverShard(em, a, { shard: 2, epoch: 1 }, 'c', 60_000), undefined, 'not to a member that is not up');
    t.same(await handOverShard(em, a, { shard: 2, epoch: 1 }, 'b', 60_000), { shard: 2, epoch: 2 });
    t.same(await renewLeases(em, b, [{ shard: 2, epoch: 2 }], 60_000), [{ shard: 2, epoch: 2 }], "the receiver holds it in its own incarnation's name");

    // b restarts under the same id: the new incarnation takes its predecessor's leases at once, at the next epoch.
    const bAgain = me('b', 'b-2');
    await joinCluster(em, { ...bAgain, address: 'x', status: 'up' });
    t.same(await acquireShards(em, bAgain, [0, 1, 2, 3], 60_000), [
      { shard: 0, epoch: 3 },
      { shard: 1, epoch: 3 },
      { shard: 2, epoch: 3 },
      { shard: 3, epoch: 2 },
    ]);
    t.same(await renewLeases(em, b, [{ shard: 3, epoch: 1 }], 60_000), [], 'the previous incarnation holds nothing');

    const rows = await listLeases(em);
    t.same(
      rows.map((r) => [r.shard, r.ownerNodeId, r.ownerIncarnation, r.epoch, r.valid]),
      [
        [0, 'b', 'b-2', 3, true],
        [1, 'b', 'b-2', 3, true],
        [2, 'b', 'b-2', 3, true],
        [3, 'b', 'b-2', 2, true],
      ],
    );
  },
);

t.test(
  'routing lookups: the owner of a shard with its address, epoch and remaining lease; members that may hold shards',
  { skip: NEEDS_POSTGRES },
  async (t) => {
    const db = await clusterDatabase(t);
    const em = db.em();
    const a = me('a');
    const b = me('b');
    await joinCluster(em, { ...a, address: 'a.internal:8081', status: 'up' });
    await joinCluster(em, { ...b, address: 'b.internal:8081', status: 'up' });
    await acquireShards(em, a, [0], 60_000);
    await acquireShards(em, b, [1, 2], 60_000);
    await em.execute(`update cluster_shard_leases set epoch = 4 where shard = 1`);

    const owner = await ownerAddressOf(em, 1);
    t.match(owner, { nodeId: 'b', address: 'b.internal:8081', epoch: 4 });
    t.ok(owner!.remainingMs > 50_000 && owner!.remainingMs <= 60_000, `the lease's remaining time by the database's clock (${owner!.remainingMs} ms)`);
    const listed = (await listLeases(em)).find((row) => row.shard === 1)!;
    t.ok(listed.remainingMs > 50_000 && listed.remainingMs <= 60_000, 'listLeases reports it too');
    t.equal(await ownerAddressOf(em, 3), undefined, 'a shard never leased has no owner');

    await setMemberStatus(em, b, 'leaving');
    t.equal((await ownerAddressOf(em, 1))?.nodeId, 'b', 'a leaving member still serves the shards it has not handed over');
    t.same(
      (await listActiveMembers(em)).map((m) => [m.nodeId, m.status]),
      [
        ['a', 'up'],
        ['b', 'leaving'],
      ],
    );
    t.same(
      (await listLiveMembers(em)).map((m) => m.nodeId),
      ['a'],
      'but gets no new shard',
    );

    await joinCluster(em, { ...me('b', 'b-2'), address: 'b.internal:8081', status: 'up' });
    t.equal(await ownerAddressOf(em, 2), undefined, 'a lease of an earlier incarnation of the member has no owner to forward to');
    await em.execute(`update cluster_shard_leases set expires_at = clock_timestamp() - interval '1 second' where shard = 0`);
    t.equal(await ownerAddressOf(em, 0), undefined, 'nor has an expired lease');
    t.equal((await listLeases(em)).find((row) => row.shard === 0)!.remainingMs, 0);
  },
);

async function setUpFencing(t: Test) {
  const db = await clusterDatabase(t);
  await db.em().execute('create table fenced_writes (id serial primary key, shard integer not null, node_id text not null, epoch bigint not null)');
  const write = (em: SqlEntityManager, nodeId: string, lease: Lease) =>
    em.execute('insert into fenced_writes (shard, node_id, epoch) values (?, ?, ?)', [lease.shard, nodeId, lease.epoch]);
  const writes = async () =>
    (await db.em().execute<{ node_id: string; epoch: string }[]>('select node_id, epoch from fenced_writes order by id')).map(
      (row) => `${row.node_id}@${row.epoch}`,
    );
  return { db, write, writes };
}

t.test('fence: a write commits while its node holds the shard at its epoch, and never after a takeover', { skip: NEEDS_POSTGRES }, async (t) => {
  const { db, write, writes } = await setUpFencing(t);
  const a = me('a');
  const b = me('b');
  const [lease] = await acquireShards(db.em(), a, [5], 60_000);
  await db.em().transactional(async (tx) => {
    await write(tx, 'a', lease!);
    const txid = await fenceShards(tx, 'a', [lease!], { holdLimitMs: 5000 });
    const [own] = await tx.execute<Array<{ id: string }>>('select txid_current()::text as id');
    t.equal(txid, own!.id, 'the fence answers the id of the transaction it guards');
  });
  t.same(await writes(), ['a@1']);

  await db.em().execute(`update cluster_shard_leases set expires_at = clock_timestamp() - interval '1 second' where shard = 5`);
  await t.rejects(
    db.em().transactional(async (tx) => {
      await write(tx, 'a', lease!);
      await fenceShards(tx, 'a', [lease!], { holdLimitMs: 5000 });
    }),
    FencedOutError,
    'an expired lease fences, even before anyone takes it',
  );
  const [taken] = await acquireShards(db.em(), b, [5], 60_000);
  t.equal(taken!.epoch, 2);

  const refused = await db
    .em()
    .transactional(async (tx) => {
      await write(tx, 'a', lease!);
      await fenceShards(tx, 'a', [lease!], { holdLimitMs: 5000 });
    })
    .catch((error: unknown) => error);
  t.ok(refused instanceof FencedOutError);
  t.match((refused as Error).message, /node a no longer owns shard 5 at epoch 1/);

  // Even a caller that swallows the error cannot commit: the database has aborted the transaction.
  const swallowed = await db
    .em()
    .transactional(async (tx) => {
      await write(tx, 'a', lease!);
      await fenceShards(tx, 'a', [lease!], { holdLimitMs: 5000 }).catch(() => {});
      await write(tx, 'a', lease!);
    })
    .catch((error: unknown) => error);
  t.match(String(swallowed), /current transaction is aborted/);

  await t.rejects(fenceShards(db.em(), 'a', [lease!], { holdLimitMs: 5000 }), /must run inside the write transaction/);
  await t.rejects(
    db.em().transactional((tx) => fenceShards(tx, 'a', [{ shard: 99, epoch: 1 }], { holdLimitMs: 5000 })),
    FencedOutError,
    'a shard never leased',
  );
  await db.em().transactional(async (tx) => {
    await write(tx, 'b', taken!);
    await fenceShards(tx, 'b', [taken!], { holdLimitMs: 5000 });
  });
  t.same(await writes(), ['a@1', 'b@2'], 'nothing a fenced-out transaction wrote remains');
});

/** The backend ids waiting for a row lock in this database. */
async function lockWaiters(db: { em(): SqlEntityManager }): Promise<number> {
  const rows = await db
    .em()
    .execute<{ n: string }[]>(`select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`);
  return Number(rows[0]!.n);
}

async function untilExpired(db: { em(): SqlEntityManager }, shard: number): Promise<void> {
  await eventually(`shard ${shard}'s lease to expire`, async () => {
    const rows = await db
      .em()
      .execute<{ expired: boolean }[]>('select expires_at <= clock_timestamp() as expired from cluster_shard_leases where shard = ?', [shard]);
    return rows[0]?.expired ? true : undefined;
  });
}

t.test('fence: a takeover waits for a fenced transaction in progress, which commits first', { skip: NEEDS_POSTGRES }, async (t) => {
  const { db, write, writes } = await setUpFencing(t);
  const [lease] = await acquireShards(db.em(), me('a'), [7], 300);

  let fenced!: () => void;
  let finish!: () => void;
  const fencedNow = new Promise<void>((resolve) => {
    fenced = resolve;
  });
  const finishNow = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const writer = db.em().transactional(async (tx) => {
    await write(tx, 'a', lease!);
    await fenceShards(tx, 'a', [lease!], { holdLimitMs: 60_000 });
    fenced();
    await finishNow;
  });
  await fencedNow;
  await untilExpired(db, 7);
  let acquired: Lease[] | undefined;
  const takeover = acquireShards(db.em(), me('b'), [7], 60_000).then((leases) => {
    acquired = leases;
  });
  await eventually('the takeover to wait on the lease row', async () => ((await lockWaiters(db)) > 0 ? true : undefined));
  t.equal(acquired, undefined, 'the takeover is blocked by the fenced transaction');
  finish();
  await writer;
  await takeover;
  t.same(acquired, [{ shard: 7, epoch: 2 }], 'and proceeds once it has committed');
  t.same(await writes(), ['a@1'], 'the fenced write landed before the takeover');
});

t.test('fence: a fenced transaction left idle is ended by the server after its hold limit, freeing the takeover', { skip: NEEDS_POSTGRES }, async (t) => {
  const { db, write, writes } = await setUpFencing(t);
  const [lease] = await acquireShards(db.em(), me('a'), [9], 300);
  let fenced!: () => void;
  let resume!: () => void;
  const fencedNow = new Promise<void>((resolve) => {
    fenced = resolve;
  });
  const resumeNow = new Promise<void>((resolve) => {
    resume = resolve;
  });
  const zombie = db
    .em()
    .transactional(async (tx) => {
      await write(tx, 'a', lease!);
      await fenceShards(tx, 'a', [lease!], { holdLimitMs: 500 });
      fenced();
      await resumeNow; // paused past its lease, holding the lock
      await write(tx, 'a', lease!);
    })
    .catch((error: unknown) => error);
  await fencedNow;
  await untilExpired(db, 9);
  t.same(await acquireShards(db.em(), me('b'), [9], 60_000), [{ shard: 9, epoch: 2 }], 'the takeover gets through once the server ends the idle transaction');
  resume();
  t.match(String(await zombie), /terminat|Connection|closed/i, 'the paused writer finds its transaction gone');
  t.same(await writes(), [], 'nothing it wrote remains');
});

t.test('contention: eight nodes racing for the same 64 shards, five rounds of takeovers, never two owners', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t, 12);
  const nodes = Array.from({ length: 8 }, (_, i) => me(`n${i}`));
  const all = Array.from({ length: 64 }, (_, shard) => shard);
  for (let round = 1; round <= 5; round++) {
    // Each node asks for every shard, in its own order, all at once.
    const results = await Promise.all(
      nodes.map((node, i) =>
        acquireShards(
          db.em(),
          node,
          all.map((_, k) => all[(k * (i + 3)) % 64]!),
          60_000,
        ).then((leases) => leases.map((lease) => ({ ...lease, node: node.nodeId }))),
      ),
    );
    const won = results.flat();
    t.equal(won.length, 64, `round ${round}: each shard won exactly once`);
    t.equal(new Set(won.map((w) => w.shard)).size, 64);
    t.ok(
      won.every((w) => w.epoch === round),
      `round ${round}: every epoch moved on by one`,
    );
    const rows = await listLeases(db.em());
    t.same(
      rows.map((r) => `${r.shard}:${r.ownerNodeId}:${r.epoch}`),
      won.sort((x, y) => x.shard - y.shard).map((w) => `${w.shard}:${w.node}:${w.epoch}`),
      'the table agrees with the winners',
    );
    await db.em().execute(`update cluster_shard_leases set expires_at = clock_timestamp() - interval '1 second'`);
  }
});

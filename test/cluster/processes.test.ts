import t from 'tap';
import { listLeases, listMembers } from '../../persistence/cluster/index.ts';
import { startNode, type Child } from '../fixtures/child.ts';
import { clusterDatabase, eventually, NEEDS_POSTGRES } from './support.ts';

// The defaults a cluster runs with, so the failover measured here is the one a deployment gets.
const TIMINGS = { CLUSTER_HEARTBEAT_MS: '1000', CLUSTER_DEAD_AFTER_MS: '5000', CLUSTER_LEASE_MS: '5000' };

interface WriteEvent {
  event: 'write';
  shard: number;
  epoch: number;
  outcome: string;
}

const events = (child: Child) => child.lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);

t.test(
  'separate processes: even spread, kill -9 fails over within the dead-after time, a SIGSTOPped node is fenced out',
  { skip: NEEDS_POSTGRES },
  async (t) => {
    const db = await clusterDatabase(t);
    await db.em().execute('create table fenced_writes (id serial primary key, node_id text not null, shard integer not null, epoch bigint not null)');
    const start = (id: string) => startNode(t, 'test/fixtures/cluster-node.ts', { DATABASE_URL: db.url, CLUSTER_NODE_ID: id, ...TIMINGS });
    const nodes = { a: start('a'), b: start('b'), c: start('c') };
    await Promise.all(Object.values(nodes).map((child) => child.line(/"event":"up"/)));

    const owners = async () => {
      const counts: Record<string, number> = {};
      for (const row of await listLeases(db.em())) if (row.valid) counts[row.ownerNodeId!] = (counts[row.ownerNodeId!] ?? 0) + 1;
      return counts;
    };
    const spread = await eventually(
      'an even spread over a, b and c',
      async () => {
        const counts = await owners();
        const values = Object.values(counts).sort();
        return Object.keys(counts).length === 3 && values.join() === '21,21,22' ? counts : undefined;
      },
      30_000,
      100,
    );
    t.same(Object.keys(spread).sort(), ['a', 'b', 'c'], `64 shards spread ${JSON.stringify(spread)}`);

    // kill -9 of c: its shards must end up owned by a and b.
    const cShards = (await listLeases(db.em())).filter((row) => row.valid && row.ownerNodeId === 'c').map((row) => row.shard);
    const killedAt = Date.now();
    nodes.c.proc.kill('SIGKILL');
    await nodes.c.exited;
    await eventually(
      "c's shards to move to a and b",
      async () => {
        const rows = await listLeases(db.em());
        return cShards.every((shard) => rows.some((row) => row.shard === shard && row.valid && row.ownerNodeId !== 'c')) ? true : undefined;
      },
      30_000,
      20,
    );
    const failoverMs = Date.now() - killedAt;
    t.comment(`failover after kill -9: ${failoverMs} ms for ${cShards.length} shards (heartbeat 1000 ms, dead after 5000 ms, lease 5000 ms)`);
    t.same(
      Object.values(
        await eventually('32 shards each on a and b', async () => {
          const counts = await owners();
          return counts.a === 32 && counts.b === 32 ? counts : undefined;
        }),
      ),
      [32, 32],
    );
    t.equal((await listMembers(db.em())).find((m) => m.nodeId === 'c')?.status, 'dead', 'c is declared dead');

    // The zombie: a starts a write for one of its shards, is paused (SIGSTOP) past its lease and declared
    // dead, b takes the shard, a resumes (SIGCONT) and tries to commit.
    const shard = (await listLeases(db.em())).find((row) => row.valid && row.ownerNodeId === 'a')!.shard;
    nodes.a.proc.stdin.write(`write ${shard} 300\n`);
    await nodes.a.line(new RegExp(`"event":"write","shard":${shard},"epoch":\\d+,"outcome":"pending"`));
    nodes.a.proc.kill('SIGSTOP');
    const pausedAt = Date.now();
    const taken = await eventually(
      `b to take shard ${shard}`,
      async () => {
        const row = (await listLeases(db.em())).find((r) => r.shard === shard);
        return row?.valid && row.ownerNodeId === 'b' ? row : undefined;
      },
      30_000,
      20,
    );
    t.comment(`shard ${shard} taken from the paused node after ${Date.now() - pausedAt} ms`);
    // Shards a handed over before (while the others joined) are not part of what it drops now.
    const lostBefore = events(nodes.a).filter((e) => e.event === 'lost').length;
    nodes.a.proc.kill('SIGCONT');
    const outcome = await nodes.a.line(new RegExp(`"event":"write","shard":${shard},"epoch":\\d+,"outcome":"(?!pending)[^"]+"`));
    const write = JSON.parse(outcome.input!) as WriteEvent;
    t.equal(write.outcome, 'fenced', "the paused node's write is refused");
    t.ok(write.epoch < taken.epoch, `it carried epoch ${write.epoch}, the shard is at ${taken.epoch}`);
    t.same(await db.em().execute('select * from fenced_writes'), [], 'nothing it wrote remains');
    await nodes.a.line(/"event":"expelled"/);
    const droppedNow = events(nodes.a)
      .filter((e) => e.event === 'lost')
      .slice(lostBefore);
    t.ok(droppedNow.length > 0 && droppedNow.every((e) => e.reason === 'expelled' || e.reason === 'lease-lost'), 'it dropped every shard');

    // It rejoins as a new incarnation and gets an even share back; b writes for the shard it took.
    await eventually(
      'a and b to share the shards again',
      async () => {
        const counts = await owners();
        return counts.a === 32 && counts.b === 32 ? true : undefined;
      },
      30_000,
      100,
    );
    nodes.b.proc.stdin.write(`write ${shard} 0\n`);
    const bWrite = await nodes.b.line(new RegExp(`"event":"write","shard":${shard},"epoch":\\d+,"outcome":"(committed|fenced)"`));
    t.match(bWrite.input, /"outcome":"committed"/, 'the owner at the new epoch commits');

    nodes.a.proc.stdin.write('stop\n');
    nodes.b.proc.stdin.write('stop\n');
    t.same(
      (await Promise.all([nodes.a.exited, nodes.b.exited])).map((e) => e.code),
      [0, 0],
    );
    t.same(
      (await listMembers(db.em())).map((m) => `${m.nodeId}:${m.status}`),
      ['c:dead'],
      'a and b left; only the dead c is in the table',
    );
    t.same(Object.keys(await owners()), [], 'and every shard was released on the way out');
  },
);

import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { FairQueue } from '../../actors/generation/fair-queue.ts';
import { SharedProviderCapacity } from '../../actors/generation/shared-provider-capacity.ts';
import { closeRedis, connectRedis, type RedisClient } from '../../runtime/redis.ts';
import { createLogger } from '../../runtime/logger.ts';
import { eventually } from './support.ts';

const NEEDS_REDIS = process.env.TEST_REDIS_URL ? false : 'shared provider capacity needs Redis: set TEST_REDIS_URL';
const logger = createLogger('silent');
/** Far longer than the test may take: a workspace woken here was woken by a grant's notice, not by the poll. */
const NO_POLL_MS = 600_000;

interface Node {
  capacity: SharedProviderCapacity;
  woken: string[];
  onWake?: (workspaceId: string) => void;
}

/** One node's capacity on its own Redis connection; provider `p` has `limit` slots in the whole cluster. */
async function node(t: Test, prefix: string, limit = 1, options: { sweepMs?: number; finished?: (ids: string[]) => Promise<string[]> } = {}): Promise<Node> {
  const redis = await connectRedis(process.env.TEST_REDIS_URL!, logger);
  const n: Node = { woken: [] } as unknown as Node;
  n.capacity = new SharedProviderCapacity(
    (provider) => (provider === 'p' ? limit : undefined),
    (workspaceId) => {
      n.woken.push(workspaceId);
      n.onWake?.(workspaceId);
    },
    { redis, prefix, logger, finished: options.finished ?? (async () => []), sweepMs: options.sweepMs ?? NO_POLL_MS, pollMs: NO_POLL_MS },
  );
  t.teardown(async () => {
    await n.capacity.close();
    await closeRedis(redis);
  });
  await n.capacity.listening;
  return n;
}

async function inspector(t: Test): Promise<RedisClient> {
  const redis = await connectRedis(process.env.TEST_REDIS_URL!, logger);
  t.teardown(() => closeRedis(redis));
  return redis;
}

/** Provider p's fair queue as Redis holds it, in FairQueue.snapshot()'s shape. */
async function redisSnapshot(redis: RedisClient, prefix: string): Promise<ReturnType<FairQueue['snapshot']>> {
  const base = `${prefix}provider-slots:p`;
  const tags = Object.entries(await redis.hGetAll(`${base}:tags`))
    .map(([w, f]): [string, number] => [w, Number(f)])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const waiting = await redis.zRangeWithScores(`${base}:waiting`, 0, -1);
  const asks = await redis.hGetAll(`${base}:asks`);
  return {
    virtualTime: Number((await redis.get(`${base}:clock`)) ?? 0),
    tags: Object.fromEntries(tags),
    asks: waiting.map(({ value, score }): [string, string, number, number] => {
      const ask = asks[value]!;
      const space = ask.lastIndexOf(' ');
      return [value, ask.slice(0, space), Number(ask.slice(space + 1)), score];
    }),
    holders: (await redis.sMembers(base)).sort(),
  };
}

/** Whether Redis holds the workspace's ask for that job. */
async function asked(redis: RedisClient, prefix: string, workspaceId: string, job: string): Promise<true | undefined> {
  const ask = await redis.hGet(`${prefix}provider-slots:p:asks`, workspaceId);
  return ask?.startsWith(`${job} `) ? true : undefined;
}

t.test('a slot freed on node 1 is granted to the workspace first in fair order, on node 2; only that workspace is woken', { skip: NEEDS_REDIS }, async (t) => {
  const prefix = `test:${randomBytes(6).toString('hex')}:`;
  const one = await node(t, prefix);
  const two = await node(t, prefix);
  const redis = await inspector(t);

  t.notOk(one.capacity.tryAcquire('p', 'a1', 'a'), 'the answer comes from Redis: not yet');
  await eventually('a1 to be granted', () => (one.woken.includes('a') ? true : undefined), 10_000, 10);
  t.ok(one.capacity.tryAcquire('p', 'a1', 'a'), 'a1 takes the free slot');
  t.notOk(one.capacity.tryAcquire('p', 'a2', 'a'), "a's next job waits");
  await eventually("a2's ask", () => asked(redis, prefix, 'a', 'a2'), 10_000, 10);
  t.notOk(two.capacity.tryAcquire('p', 'b1', 'b'));
  await eventually("b1's ask", () => asked(redis, prefix, 'b', 'b1'), 10_000, 10);
  t.same(
    (await redisSnapshot(redis, prefix)).asks.map(([w]) => w),
    ['b', 'a'],
    'b, which holds nothing, is ahead of a, which holds a slot',
  );

  one.woken.length = 0;
  one.capacity.release('a1');
  await eventually('node 2 to be told of the grant', () => (two.woken.includes('b') ? true : undefined), 10_000, 10);
  t.ok(two.capacity.tryAcquire('p', 'b1', 'b'), 'b1 on node 2 takes the slot node 1 freed');
  t.same(one.woken, [], 'a, on node 1, was not woken: no race for the slot');
  t.same(await redis.sMembers(`${prefix}provider-slots:p`), ['b1']);

  two.capacity.release('b1');
  await eventually('a2 to be granted', () => (one.woken.includes('a') ? true : undefined), 10_000, 10);
  t.ok(one.capacity.tryAcquire('p', 'a2', 'a'));
  one.capacity.release('a2');
  await eventually('nothing left in Redis', async () => ((await redisSnapshot(redis, prefix)).holders.length === 0 ? true : undefined), 10_000, 10);
  t.same(await redisSnapshot(redis, prefix), { virtualTime: 0, tags: {}, asks: [], holders: [] }, 'nobody waits or holds: no tags are kept');
});

t.test('two nodes grant in the order the pure fair queue does, with the same tags, step by step', { skip: NEEDS_REDIS }, async (t) => {
  const prefix = `test:${randomBytes(6).toString('hex')}:`;
  const one = await node(t, prefix, 2);
  const two = await node(t, prefix, 2);
  const redis = await inspector(t);
  const plan = [
    { id: 'a', weight: 3, node: one, jobs: 10 },
    { id: 'b', weight: 1, node: two, jobs: 4 },
    { id: 'c', weight: 2, node: one, jobs: 5 },
    { id: 'd', weight: 1, node: two, jobs: 3 },
  ];

  // The model: the same workspaces on the pure queue, each starting jobs in its order when granted.
  const model = new FairQueue();
  const modelQueues = new Map(plan.map((w) => [w.id, Array.from({ length: w.jobs }, (_, i) => `${w.id}${i + 1}`)]));
  const modelStarted: string[] = [];
  const modelPump = (id: string): void => {
    const queue = modelQueues.get(id)!;
    const weight = plan.find((w) => w.id === id)!.weight;
    while (queue.length > 0) {
      const { holds, grants } = model.ask(id, queue[0]!, weight, 2);
      for (const g of grants) modelPump(g.workspaceId);
      if (!holds) return;
      modelStarted.push(queue.shift()!);
    }
  };

  // The cluster: each workspace's queue on its node, started the same way when its node is told of a grant.
  const queues = new Map(plan.map((w) => [w.id, Array.from({ length: w.jobs }, (_, i) => `${w.id}${i + 1}`)]));
  const started: string[] = [];
  const pump = (id: string): void => {
    const w = plan.find((x) => x.id === id)!;
    const queue = queues.get(id)!;
    while (queue.length > 0 && w.node.capacity.tryAcquire('p', queue[0]!, id, w.weight)) started.push(queue.shift()!);
  };
  one.onWake = pump;
  two.onWake = pump;
  /** Until the workspace's next job has its ask in Redis (or it has none left), so both sides see the same asks. */
  const settled = async (id: string) => {
    const next = queues.get(id)![0];
    if (next === undefined) return;
    await eventually(`${next}'s ask`, () => asked(redis, prefix, id, next), 10_000, 5);
  };

  for (const w of plan) {
    modelPump(w.id);
    pump(w.id);
    // The first ask of each workspace is answered by Redis: a grant (woken, started) or a queued ask.
    await eventually(
      `${w.id}'s first ask answered`,
      async () => (started.some((j) => j.startsWith(w.id)) || (await asked(redis, prefix, w.id, `${w.id}1`)) ? true : undefined),
      10_000,
      5,
    );
    await settled(w.id);
  }
  t.same(started, modelStarted, 'the first jobs');
  t.same(await redisSnapshot(redis, prefix), model.snapshot(), 'the same state');

  const total = plan.reduce((sum, w) => sum + w.jobs, 0);
  // Each step ends the oldest job in flight, on its own node; the freed slot's grant starts the next.
  for (let step = 0; started.length < total || model.holding > 0; step++) {
    const running = (await redis.sMembers(`${prefix}provider-slots:p`)).sort((x, y) => started.indexOf(x) - started.indexOf(y));
    const job = running[0]!;
    const w = plan.find((x) => job.startsWith(x.id))!;
    const before = started.length;
    w.node.capacity.release(job);
    for (const g of model.release(job, 2)) modelPump(g.workspaceId);
    if (modelStarted.length > before) {
      const next = modelStarted[before]!;
      await eventually(`${next} to start`, () => (started.length > before ? true : undefined), 10_000, 5);
      await settled(next.replace(/\d+$/, ''));
    } else {
      await eventually(`${job}'s slot to be freed`, async () => (!(await redis.sIsMember(`${prefix}provider-slots:p`, job)) ? true : undefined), 10_000, 5);
    }
    t.same(await redisSnapshot(redis, prefix), model.snapshot(), `step ${step} (${job} ended): the same state`);
  }
  t.same(started, modelStarted, 'every job started in the same order');
  t.equal(started.length, total);
  // a (weight 3) took both free slots; then by finish tag: c1 0.5, a3 0.67, a4 1.0 less a third of a millionth, then b1, c2, d1 at 1.0 (by id).
  t.same(started.slice(0, 8), ['a1', 'a2', 'c1', 'a3', 'a4', 'b1', 'c2', 'd1'], 'the fair order itself');
});

t.test('slots and asks of jobs that ended on a node that died are swept; the slot goes to the next live ask', { skip: NEEDS_REDIS }, async (t) => {
  const prefix = `test:${randomBytes(6).toString('hex')}:`;
  const dead = await node(t, prefix);
  const redis = await inspector(t);
  t.notOk(dead.capacity.tryAcquire('p', 'x1', 'x'));
  await eventually('x1 to be granted', () => (dead.woken.includes('x') ? true : undefined), 10_000, 10);
  t.ok(dead.capacity.tryAcquire('p', 'x1', 'x'));
  t.notOk(dead.capacity.tryAcquire('p', 'z1', 'z'));
  await eventually("z1's ask", () => asked(redis, prefix, 'z', 'z1'), 10_000, 10);
  // The node stops without releasing anything, as one that died would; x1 and z1 then end elsewhere.
  await dead.capacity.close();

  const ended = new Set(['x1', 'z1']);
  const live = await node(t, prefix, 1, { sweepMs: 100, finished: async (ids) => ids.filter((id) => ended.has(id)) });
  t.notOk(live.capacity.tryAcquire('p', 'b1', 'b'));
  await eventually('b1 to be granted once the sweep freed x1', () => (live.woken.includes('b') ? true : undefined), 10_000, 10);
  t.ok(live.capacity.tryAcquire('p', 'b1', 'b'), 'b1 holds the slot, not z1 whose job ended');
  t.same(await redis.sMembers(`${prefix}provider-slots:p`), ['b1']);
  t.same((await redisSnapshot(redis, prefix)).asks, [], "z1's ask is gone");
});

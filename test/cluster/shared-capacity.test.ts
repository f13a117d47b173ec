import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import t, { type Test } from 'tap';
import { SharedProviderCapacity, staleSlotsAmong } from '../../actors/generation/shared-provider-capacity.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { closeRedis, connectRedis, type RedisClient } from '../../runtime/redis.ts';
import { createLogger } from '../../runtime/logger.ts';
import { clusterDatabase, eventually, NEEDS_POSTGRES } from './support.ts';

const NEEDS_REDIS = process.env.TEST_REDIS_URL ? false : 'shared provider capacity needs Redis: set TEST_REDIS_URL';
const logger = createLogger('silent');
/** Far longer than the test may take: a waiter woken here was woken by a notice, not by the poll. */
const NO_POLL_MS = 600_000;

interface Node {
  capacity: SharedProviderCapacity;
  redis: RedisClient;
  wakes: EventEmitter;
  /** Replies 0 ("no room") of the node's slot requests so far. */
  refused(): number;
}

/** One node's capacity on its own Redis connection; provider `p` has one slot in the whole cluster. */
async function node(t: Test, prefix: string): Promise<Node> {
  const redis = await connectRedis(process.env.TEST_REDIS_URL!, logger);
  let refused = 0;
  // Counts the refusals of the node's real ACQUIRE script (the command itself runs unchanged).
  const observed = new Proxy(redis, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (property === 'eval') {
        return async (...args: Parameters<RedisClient['eval']>) => {
          const reply = await target.eval(...args);
          if (String(args[0]).includes('SCARD') && Number(reply) === 0) refused++;
          return reply;
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const wakes = new EventEmitter();
  const capacity = new SharedProviderCapacity(
    (provider) => (provider === 'p' ? 1 : undefined),
    (workspaceId) => wakes.emit('wake', workspaceId),
    {
      redis: observed,
      prefix,
      logger,
      finished: async () => [],
      sweepMs: NO_POLL_MS,
      pollMs: NO_POLL_MS,
    },
  );
  t.teardown(async () => {
    await capacity.close();
    await closeRedis(redis);
  });
  await capacity.listening;
  return { capacity, redis, wakes, refused: () => refused };
}

/** Takes a slot as a workspace actor does: tries, and tries again each time the workspace is woken. */
function acquire(n: Node, generationId: string, workspaceId: string): Promise<void> {
  return new Promise((resolve) => {
    const attempt = () => {
      if (!n.capacity.tryAcquire('p', generationId, workspaceId)) return;
      n.wakes.off('wake', onWake);
      resolve();
    };
    const onWake = (woken: string) => {
      if (woken === workspaceId) attempt();
    };
    n.wakes.on('wake', onWake);
    attempt();
  });
}

t.test('a slot freed on one node wakes the workspace waiting for it on another at once, through the channel', { skip: NEEDS_REDIS }, async (t) => {
  const prefix = `test:${randomBytes(6).toString('hex')}:`;
  const a = await node(t, prefix);
  const b = await node(t, prefix);
  // Everything said on the channel, which carries the key prefix.
  const listener = await connectRedis(process.env.TEST_REDIS_URL!, logger);
  t.teardown(() => closeRedis(listener));
  const heard: string[] = [];
  await listener.subscribe(`${prefix}provider-slots-freed`, (message) => heard.push(message));

  await acquire(a, 'gen_1', 'ws_a');
  t.same(await a.redis.sMembers(`${prefix}provider-slots:p`), ['gen_1']);
  let bHolds = false;
  const waiting = acquire(b, 'gen_2', 'ws_b').then(() => {
    bHolds = true;
  });
  await eventually("node b's request to be refused (the cluster's one slot is held)", () => (b.refused() > 0 ? true : undefined), 10_000, 10);
  t.notOk(bHolds, 'node b waits');
  t.same(heard, [], 'nothing freed yet, nothing said');

  a.capacity.release('gen_1');
  // The poll is ten minutes away: only the notice can wake node b's workspace within this bound.
  await eventually('node b to take the slot freed on node a', () => (bHolds ? true : undefined), 20_000, 10);
  await waiting;
  t.same(await b.redis.sMembers(`${prefix}provider-slots:p`), ['gen_2'], "the slot is node b's job's now");
  await eventually('the notice to be heard', () => (heard.length > 0 ? true : undefined), 10_000, 10);
  t.same(heard, ['p'], "one notice, naming the provider, on the prefix's channel");

  // Releasing a job that holds no slot frees nothing and says nothing.
  a.capacity.release('gen_1');
  b.capacity.release('gen_2');
  await eventually('the second notice', () => (heard.length >= 2 ? true : undefined), 10_000, 10);
  t.same(heard, ['p', 'p'], 'only the release that freed a slot was announced');
});

t.test('close() ends the subscription: a closed node is no longer woken, and its connection is closed', { skip: NEEDS_REDIS }, async (t) => {
  const prefix = `test:${randomBytes(6).toString('hex')}:`;
  const a = await node(t, prefix);
  const b = await node(t, prefix);
  await acquire(a, 'gen_1', 'ws_a');
  const woken: string[] = [];
  b.wakes.on('wake', (workspaceId: string) => woken.push(workspaceId));
  t.notOk(b.capacity.tryAcquire('p', 'gen_2', 'ws_b'));
  await eventually("node b's request to be refused", () => (b.refused() > 0 ? true : undefined), 10_000, 10);
  await b.capacity.close();
  const [subscribers] = Object.values(await a.redis.pubSubNumSub(`${prefix}provider-slots-freed`));
  t.equal(subscribers, 1, "only node a's subscriber is left on the channel");
  const listener = await connectRedis(process.env.TEST_REDIS_URL!, logger);
  t.teardown(() => closeRedis(listener));
  let heard = false;
  await listener.subscribe(`${prefix}provider-slots-freed`, () => {
    heard = true;
  });
  a.capacity.release('gen_1');
  await eventually('the notice of the freed slot', () => (heard ? true : undefined), 10_000, 10);
  t.same(woken, [], 'the closed node woke nobody');
});

t.test('the sweep of stale slots: each node takes the ended jobs of its own shards, and ids gone from the database', { skip: NEEDS_POSTGRES }, async (t) => {
  const db = await clusterDatabase(t);
  const shards = 4;
  const mine = 'ws_mine';
  let theirs = 'ws_theirs_0';
  for (let i = 1; shardOf(theirs, shards) === shardOf(mine, shards); i++) theirs = `ws_theirs_${i}`;
  const em = db.em();
  for (const ws of [mine, theirs]) {
    await em.execute(`insert into workspaces (id, name, plan, created_at, updated_at) values (?, ?, 'pro', now(), now())`, [ws, ws]);
    await em.execute(
      `insert into generations (id, workspace_id, mode, model_id, status, params, inputs, payment_mode, credits, provider, timeline, queue_deadline, created_at, updated_at)
       select ? || s, ?, 'text_to_text', 'local/text-mini', s, '{}', '{}', 'credits', 1, 'local', '[]', now(), now(), now()
         from unnest(array['running', 'succeeded', 'failed', 'queued']) as s`,
      [`gen_${ws}_`, ws],
    );
  }
  const ids = [mine, theirs].flatMap((ws) => ['running', 'succeeded', 'failed', 'queued'].map((s) => `gen_${ws}_${s}`)).concat('gen_gone');
  const stale = await staleSlotsAmong(db, ids, { shards: [shardOf(mine, shards)], shardCount: shards });
  t.same(
    stale.sort(),
    [`gen_${mine}_failed`, `gen_${mine}_succeeded`, 'gen_gone'].sort(),
    "the ended jobs of this node's shard, and the id gone; not the other shard's, nor unfinished ones",
  );
  t.same(await staleSlotsAmong(db, ids, { shards: [], shardCount: shards }), ['gen_gone'], 'a node without shards sweeps only ids gone');
});

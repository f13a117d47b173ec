import { closeRedis, type RedisClient } from '../../runtime/redis.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { Database } from '../../persistence/database.ts';
import { endedOrGoneAmong } from '../../persistence/stores/generations/unfinished.ts';
import { costOf } from './fair-queue.ts';
import { ProviderCapacity } from './provider-capacity.ts';

/**
 * The rules of fair-queue.ts, run by Redis on one provider's keys (each script atomic, so every node sees
 * one order). KEYS: the set of jobs holding slots, job → workspace of those jobs, workspace → slots held,
 * the waiting workspaces by finish tag (sorted set), workspace → its ask ("<job> <start tag>"),
 * workspace → the finish tag of its last slot, the virtual time. Each grant is said on the channel of
 * grants as "<workspace>\n<job>\n<provider>"; each freed slot on the channel of freed slots.
 */
const RULES = `local slots, owners, held, waiting, asks, tags, clock = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local function num(n) return string.format('%.0f', n) end
local function vtime() return tonumber(redis.call('GET', clock) or '0') end
local function take(job, ws)
  redis.call('SADD', slots, job)
  if ws ~= '' then
    redis.call('HSET', owners, job, ws)
    redis.call('HINCRBY', held, ws, 1)
  end
end
local function forget(ws)
  if ws ~= '' and redis.call('HEXISTS', held, ws) == 0 and redis.call('HEXISTS', asks, ws) == 0 then redis.call('HDEL', tags, ws) end
end
local function free(job)
  if redis.call('SREM', slots, job) == 0 then return false end
  local ws = redis.call('HGET', owners, job)
  if ws then
    redis.call('HDEL', owners, job)
    if redis.call('HINCRBY', held, ws, -1) <= 0 then redis.call('HDEL', held, ws) end
    forget(ws)
  end
  return true
end
local function withdraw(ws)
  redis.call('HDEL', asks, ws)
  redis.call('ZREM', waiting, ws)
  forget(ws)
end
local function rebase()
  if redis.call('ZCARD', waiting) > 0 then return end
  local v = vtime()
  if v == 0 then return end
  local all = redis.call('HGETALL', tags)
  for i = 1, #all, 2 do
    local shifted = tonumber(all[i + 1]) - v
    if shifted > 0 then redis.call('HSET', tags, all[i], num(shifted)) else redis.call('HDEL', tags, all[i]) end
  end
  redis.call('DEL', clock)
end
local function grant(limit, provider, channel)
  while redis.call('SCARD', slots) < limit do
    local head = redis.call('ZRANGE', waiting, 0, 0, 'WITHSCORES')
    if #head == 0 then break end
    local ws, finish = head[1], tonumber(head[2])
    local ask = redis.call('HGET', asks, ws)
    redis.call('HDEL', asks, ws)
    redis.call('ZREM', waiting, ws)
    if ask then
      local job, start = string.match(ask, '^(.*) (%d+)$')
      if tonumber(start) > vtime() then redis.call('SET', clock, start) end
      redis.call('HSET', tags, ws, num(finish))
      take(job, ws)
      redis.call('PUBLISH', channel, ws .. '\\n' .. job .. '\\n' .. provider)
    end
  end
  rebase()
end
`;

/**
 * A job asks for a slot: 1 if it holds one (granted earlier, or free with nobody waiting: taken now), else
 * 0 and its workspace waits (its ask queued, unless one of the workspace's waits already).
 * ARGV: job, workspace, limit, cost, provider, channel of grants.
 */
const ACQUIRE = `${RULES}
local job, ws, limit, cost = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if redis.call('SISMEMBER', slots, job) == 1 then return 1 end
grant(limit, ARGV[5], ARGV[6])
if redis.call('SISMEMBER', slots, job) == 1 then return 1 end
if redis.call('HEXISTS', asks, ws) == 1 then return 0 end
local start = math.max(vtime(), tonumber(redis.call('HGET', tags, ws) or '0'))
local finish = start + cost
if redis.call('ZCARD', waiting) == 0 and redis.call('SCARD', slots) < limit then
  if start > vtime() then redis.call('SET', clock, num(start)) end
  redis.call('HSET', tags, ws, num(finish))
  take(job, ws)
  rebase()
  return 1
end
redis.call('HSET', asks, ws, job .. ' ' .. num(start))
redis.call('ZADD', waiting, num(finish), ws)
return 0`;

/**
 * The job ended: its slot is freed (said on the channel of freed slots) or its workspace's ask withdrawn,
 * and the free slots are granted in fair order. 1 if a slot was freed, else 0.
 * ARGV: job, workspace ('' if not known), limit, provider, channel of grants, channel of freed slots.
 */
const RELEASE = `${RULES}
local job, ws = ARGV[1], ARGV[2]
if ws ~= '' then
  local ask = redis.call('HGET', asks, ws)
  if ask and string.match(ask, '^(.*) %d+$') == job then withdraw(ws) end
end
local freed = free(job)
if freed then redis.call('PUBLISH', ARGV[6], ARGV[4]) end
grant(tonumber(ARGV[3]), ARGV[4], ARGV[5])
if freed then return 1 end
return 0`;

/**
 * Stale jobs (ended, or gone from the database) lose their slots and their asks; the free slots are granted.
 * ARGV: limit, provider, channel of grants, channel of freed slots, then the stale job ids.
 */
const SWEEP = `${RULES}
local stale, any = {}, false
for i = 5, #ARGV do
  stale[ARGV[i]] = true
  if free(ARGV[i]) then any = true end
end
local all = redis.call('HGETALL', asks)
for i = 1, #all, 2 do
  if stale[string.match(all[i + 1], '^(.*) %d+$')] then withdraw(all[i]) end
end
if any then redis.call('PUBLISH', ARGV[4], ARGV[2]) end
grant(tonumber(ARGV[1]), ARGV[2], ARGV[3])
return 0`;

/**
 * How often a node asks again for the asks it has waiting: a safety net, for a notice of a grant lost
 * while the subscriber connection was down (notices wake the workspace at once otherwise).
 */
const POLL_MS = 1_000;

export interface SharedCapacityOptions {
  redis: RedisClient;
  /** REDIS_KEY_PREFIX; the set of a provider is `<prefix>provider-slots:<provider>`, its other keys beside it. */
  prefix: string;
  logger: Logger;
  /** Of the given generation ids, those that are no longer unfinished (ended, or gone): their slots are stale. */
  finished: (generationIds: string[]) => Promise<string[]>;
  /** Between two sweeps of stale slots and asks (a node that died between a job's end and its release). */
  sweepMs: number;
  /** Between two looks at the asks waiting when no notice came (default POLL_MS). */
  pollMs?: number;
}

/** A workspace's one ask for a slot of a provider, as this node made it. */
interface Pending {
  generationId: string;
  workspaceId: string;
  provider: string;
  weight: number;
  /** Its last ask got no answer from Redis: asked again at the next freed slot or poll. */
  failed: boolean;
}

/**
 * Cluster mode: a provider's concurrency limit and its fair order hold across the cluster. Each provider
 * with a limit has, in Redis, the set of the generation ids holding its slots and the fair queue of the
 * workspaces waiting for one (fair-queue.ts's rules in Lua: the scripts above, each atomic). A job takes a
 * slot by ACQUIRE (free with nobody waiting, or granted to it already); otherwise its workspace's ask is
 * queued there. A job's end runs RELEASE, which frees its slot and grants free slots to the next workspaces
 * in fair order, whichever node they live on: each grant is announced on `<prefix>provider-slots-granted`,
 * every node listens on a connection of its own, and the node where that workspace waits records the grant
 * and wakes its actor, which takes the slot. A freed slot is also announced on `<prefix>provider-slots-freed`
 * (its message: the provider). The actors' API stays synchronous: a job without a slot yet makes the
 * workspace wait while the slot is asked for. A grant notice may be lost while the subscriber reconnects:
 * every pollMs the node asks again for its waiting asks (a granted job is a member of the set: 1). A job in
 * flight on a node that died keeps its member: the new owner counts it again (`hold`, a set add, so once);
 * members and asks whose job has ended are swept every sweepMs. Providers without a limit are counted
 * locally, as on a single node.
 */
export class SharedProviderCapacity extends ProviderCapacity {
  /** Jobs of this node's workspaces holding a slot of a provider with a limit, taken (job → provider). */
  private readonly holding = new Map<string, string>();
  /** Slots granted by Redis and not yet taken by their workspace's next scheduling round (job → provider). */
  private readonly granted = new Map<string, string>();
  /** The workspace of each job holding or granted a slot here. */
  private readonly workspaceOf = new Map<string, string>();
  /** One ask per workspace and provider at a time (`<workspace>\n<provider>`), so it never holds slots its plan cannot use. */
  private readonly pending = new Map<string, Pending>();
  private readonly pendingKeyOf = new Map<string, string>();
  private readonly asking = new Set<string>();
  /** Providers with a limit this node has used: their slots are swept. */
  private readonly providers = new Set<string>();
  private pollTimer: NodeJS.Timeout | undefined;
  private readonly sweepTimer: NodeJS.Timeout;
  private readonly pollMs: number;
  private readonly freedChannel: string;
  private readonly grantChannel: string;
  private subscriber: RedisClient | undefined;
  /** Settles once the channels are listened to (or listening failed: the poll still runs). */
  readonly listening: Promise<void>;
  private closed = false;

  constructor(
    limitOf: (provider: string) => number | undefined,
    wake: (workspaceId: string) => void,
    private readonly options: SharedCapacityOptions,
  ) {
    super(limitOf, wake);
    this.pollMs = options.pollMs ?? POLL_MS;
    this.freedChannel = `${options.prefix}provider-slots-freed`;
    this.grantChannel = `${options.prefix}provider-slots-granted`;
    this.sweepTimer = setInterval(() => void this.sweep(), options.sweepMs);
    this.sweepTimer.unref();
    this.listening = this.listen();
  }

  /** A subscribed connection can do nothing else, so the channels get their own (node-redis resubscribes after a reconnect). */
  private async listen(): Promise<void> {
    const subscriber = this.options.redis.duplicate();
    subscriber.on('error', (error: Error) => this.options.logger.warn({ err: error }, 'provider slots: subscriber connection error'));
    this.subscriber = subscriber;
    try {
      await subscriber.connect();
      await subscriber.subscribe(this.grantChannel, (message) => this.grantedSomewhere(message));
      await subscriber.subscribe(this.freedChannel, (provider) => this.freedSomewhere(provider));
    } catch (error) {
      this.options.logger.warn({ err: error }, 'provider slots: could not listen for grants; waiting workspaces poll instead');
    }
    // Closed while connecting: close() found nothing open yet.
    if (this.closed) await this.closeSubscriber();
  }

  /** A slot was granted (by any node): if the ask is one of this node's, its workspace takes it. */
  private grantedSomewhere(message: string): void {
    if (this.closed) return;
    const [workspaceId = '', generationId = '', provider = ''] = message.split('\n', 3);
    if (this.pending.get(`${workspaceId}\n${provider}`)?.generationId !== generationId) return;
    this.grantedHere(generationId, provider, workspaceId);
  }

  /** A slot of the provider was freed: asks of this node that Redis did not answer are made again now. */
  private freedSomewhere(provider: string): void {
    if (this.closed) return;
    for (const pending of this.pending.values()) if (pending.provider === provider && pending.failed) this.ask(pending);
  }

  private grantedHere(generationId: string, provider: string, workspaceId: string): void {
    this.clearPending(generationId);
    this.granted.set(generationId, provider);
    this.workspaceOf.set(generationId, workspaceId);
    this.wake(workspaceId);
  }

  override tryAcquire(provider: string, generationId: string, workspaceId: string, weight = 1): boolean {
    if (this.limitOf(provider) === undefined) return super.tryAcquire(provider, generationId, workspaceId, weight);
    if (this.holding.get(generationId) === provider) return true;
    if (this.granted.get(generationId) === provider) {
      this.granted.delete(generationId);
      this.holding.set(generationId, provider);
      return true;
    }
    const key = `${workspaceId}\n${provider}`;
    if (!this.pending.has(key)) {
      const pending: Pending = { generationId, workspaceId, provider, weight, failed: false };
      this.pending.set(key, pending);
      this.pendingKeyOf.set(generationId, key);
      this.providers.add(provider);
      this.ask(pending);
    }
    return false;
  }

  /** Redis answers asynchronously: a job being created never takes a limited provider's slot at once; it asks when scheduled. */
  override acquireIfFree(provider: string, generationId: string, workspaceId: string, weight = 1): boolean {
    if (this.limitOf(provider) === undefined) return super.acquireIfFree(provider, generationId, workspaceId, weight);
    return this.holding.get(generationId) === provider;
  }

  override hold(provider: string, generationId: string): void {
    if (this.limitOf(provider) === undefined) return super.hold(provider, generationId);
    this.holding.set(generationId, provider);
    this.providers.add(provider);
    this.command(() => this.options.redis.sAdd(this.keysOf(provider)[0]!, generationId));
  }

  override release(generationId: string): void {
    const key = this.pendingKeyOf.get(generationId);
    const pending = key === undefined ? undefined : this.pending.get(key);
    const provider = this.holding.get(generationId) ?? this.granted.get(generationId) ?? pending?.provider;
    const limit = provider === undefined ? undefined : this.limitOf(provider);
    if (provider === undefined || limit === undefined) return super.release(generationId);
    const workspaceId = this.workspaceOf.get(generationId) ?? pending?.workspaceId ?? '';
    this.holding.delete(generationId);
    this.granted.delete(generationId);
    this.workspaceOf.delete(generationId);
    this.clearPending(generationId);
    this.command(() =>
      this.options.redis.eval(RELEASE, {
        keys: this.keysOf(provider),
        arguments: [generationId, workspaceId, String(limit), provider, this.grantChannel, this.freedChannel],
      }),
    );
  }

  /** Stops the timers and closes the subscriber connection. The asks stay in Redis: a workspace's next owner takes them over. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweepTimer);
    if (this.pollTimer) clearTimeout(this.pollTimer);
    await this.closeSubscriber();
  }

  private async closeSubscriber(): Promise<void> {
    try {
      await closeRedis(this.subscriber);
    } catch (error) {
      this.options.logger.warn({ err: error }, 'provider slots: closing the subscriber connection failed');
    }
  }

  private clearPending(generationId: string): void {
    const key = this.pendingKeyOf.get(generationId);
    if (key === undefined) return;
    this.pendingKeyOf.delete(generationId);
    if (this.pending.get(key)?.generationId === generationId) this.pending.delete(key);
  }

  private ask(pending: Pending): void {
    const { generationId, workspaceId, provider, weight } = pending;
    const limit = this.limitOf(provider);
    if (this.asking.has(generationId) || this.closed || limit === undefined) return;
    this.asking.add(generationId);
    pending.failed = false;
    const still = () => this.pending.get(`${workspaceId}\n${provider}`) === pending;
    this.options.redis
      .eval(ACQUIRE, {
        keys: this.keysOf(provider),
        arguments: [generationId, workspaceId, String(limit), String(costOf(weight)), provider, this.grantChannel],
      })
      .then(
        (reply) => {
          this.asking.delete(generationId);
          // Released meanwhile (its RELEASE ran after this script and gave back what it took), or granted by a notice.
          if (!still()) return;
          if (Number(reply) === 1) this.grantedHere(generationId, provider, workspaceId);
          else this.schedulePoll();
        },
        (error: unknown) => {
          this.asking.delete(generationId);
          if (still()) pending.failed = true;
          this.options.logger.warn({ err: error, provider }, 'provider slot: Redis did not answer; trying again');
          this.schedulePoll();
        },
      );
  }

  /** Asks again for every ask of this node still waiting: a granted job is a member of the set by now. */
  private schedulePoll(): void {
    if (this.pollTimer || this.closed) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      for (const pending of [...this.pending.values()]) this.ask(pending);
    }, this.pollMs);
  }

  private async sweep(): Promise<void> {
    try {
      for (const provider of [...this.providers]) {
        const limit = this.limitOf(provider);
        if (limit === undefined) continue;
        const keys = this.keysOf(provider);
        const members = await this.options.redis.sMembers(keys[0]!);
        const askers = (await this.options.redis.hVals(keys[4]!)).map((ask) => ask.slice(0, ask.lastIndexOf(' ')));
        const ids = [...new Set([...members, ...askers])];
        if (ids.length === 0) continue;
        const stale = await this.options.finished(ids);
        if (stale.length > 0) {
          await this.options.redis.eval(SWEEP, { keys, arguments: [String(limit), provider, this.grantChannel, this.freedChannel, ...stale] });
        }
      }
    } catch (error) {
      this.options.logger.warn({ err: error }, 'sweeping stale provider slots failed; trying again later');
    }
  }

  private command(run: () => Promise<unknown>): void {
    run().catch((error: unknown) => this.options.logger.warn({ err: error }, 'provider slot: Redis command failed'));
  }

  /** The provider's keys, in the scripts' KEYS order; the first is the set of slots, whose name predates the others. */
  private keysOf(provider: string): string[] {
    const slots = `${this.options.prefix}provider-slots:${provider}`;
    return [slots, `${slots}:owners`, `${slots}:held`, `${slots}:waiting`, `${slots}:asks`, `${slots}:tags`, `${slots}:clock`];
  }
}

/**
 * Of the generation ids holding slots, those whose slots are stale and that this node sweeps: the ended
 * jobs of the shards it owns (so each is swept by one node), and ids no longer in the database at all.
 */
export function staleSlotsAmong(db: Database, ids: string[], owned: { shards: number[]; shardCount: number }): Promise<string[]> {
  return endedOrGoneAmong(db, ids, owned);
}

import { closeRedis, type RedisClient } from '../../runtime/redis.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { Database } from '../../persistence/database.ts';
import { shardOfSql } from '../../persistence/cluster/shard-sql.ts';
import { ProviderCapacity } from './provider-capacity.ts';

/** Takes a slot for the generation if the provider's set has room (or already holds it): 1, else 0. */
const ACQUIRE = `if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 1 end
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[2]) then redis.call('SADD', KEYS[1], ARGV[1]) return 1 end
return 0`;

/** Gives the generation's slot back and, if it held one, says so on the channel: 1 if a slot was freed, else 0. */
const RELEASE = `if redis.call('SREM', KEYS[1], ARGV[1]) == 1 then redis.call('PUBLISH', ARGV[2], ARGV[3]) return 1 end
return 0`;

/**
 * How often workspaces waiting for a provider look again on their own: a safety net, for a notice of a
 * freed slot lost while the subscriber connection was down (notices wake them at once otherwise).
 */
const POLL_MS = 1_000;

export interface SharedCapacityOptions {
  redis: RedisClient;
  /** REDIS_KEY_PREFIX; the set of a provider is `<prefix>provider-slots:<provider>`. */
  prefix: string;
  logger: Logger;
  /** Of the given generation ids, those that are no longer unfinished (ended, or gone): their slots are stale. */
  finished: (generationIds: string[]) => Promise<string[]>;
  /** Between two sweeps of stale slots (a node that died between a job's end and its release). */
  sweepMs: number;
  /** Between two looks of the waiting workspaces when no notice came (default POLL_MS). */
  pollMs?: number;
}

/**
 * Cluster mode: a provider's concurrency limit holds across the cluster. Each provider with a limit has one
 * Redis set whose members are the generation ids holding its slots; a slot is taken by an atomic script
 * (room left, or already a member) and given back when the job ends, with a notice on the channel
 * `<prefix>provider-slots-freed` (its message: the provider), which every node hears on a connection of its
 * own and answers by waking the workspaces it has waiting for that provider. The actors' API stays
 * synchronous: a job without a slot yet makes the workspace wait while the slot is asked for, and the
 * workspace is told to schedule again once granted, once a slot of that provider is freed anywhere, or
 * (a notice may be lost while the subscriber reconnects) every pollMs. A job in flight on a node that died keeps
 * its member: the new owner counts it again (`hold`, a set add, so once); a member whose job has ended is
 * swept every sweepMs. Providers without a limit are counted locally, as on a single node.
 */
export class SharedProviderCapacity extends ProviderCapacity {
  /** Slots granted by Redis and not yet taken by their workspace's next scheduling round. */
  private readonly granted = new Map<string, string>();
  private readonly asking = new Set<string>();
  /**
   * One slot asked for (or granted and not yet taken) per workspace and provider at a time: a workspace asks
   * for its next job's slot only once the previous one is taken, so it never holds slots its plan cannot use.
   */
  private readonly pendingOf = new Map<string, string>();
  private readonly pendingKeyOf = new Map<string, string>();
  /**
   * Notices of freed slots heard per provider. An ask refused while a notice came in was answered before
   * that slot was freed, so its workspace asks again at once instead of waiting for the poll.
   */
  private readonly notices = new Map<string, number>();
  private pollTimer: NodeJS.Timeout | undefined;
  private readonly sweepTimer: NodeJS.Timeout;
  private readonly pollMs: number;
  private readonly channel: string;
  private subscriber: RedisClient | undefined;
  /** Settles once the channel is listened to (or listening failed: the poll still runs). */
  readonly listening: Promise<void>;
  private closed = false;

  constructor(limitOf: (provider: string) => number | undefined, wake: (workspaceId: string) => void, private readonly options: SharedCapacityOptions) {
    super(limitOf, wake);
    this.pollMs = options.pollMs ?? POLL_MS;
    this.channel = `${options.prefix}provider-slots-freed`;
    this.sweepTimer = setInterval(() => void this.sweep(), options.sweepMs);
    this.sweepTimer.unref();
    this.listening = this.listen();
  }

  /** A subscribed connection can do nothing else, so the channel gets its own (node-redis resubscribes after a reconnect). */
  private async listen(): Promise<void> {
    const subscriber = this.options.redis.duplicate();
    subscriber.on('error', (error: Error) => this.options.logger.warn({ err: error }, 'provider slots: subscriber connection error'));
    this.subscriber = subscriber;
    try {
      await subscriber.connect();
      await subscriber.subscribe(this.channel, (provider) => this.freedElsewhere(provider));
    } catch (error) {
      this.options.logger.warn({ err: error }, 'provider slots: could not listen for freed slots; waiting workspaces poll instead');
    }
    // Closed while connecting: close() found nothing open yet.
    if (this.closed) await this.closeSubscriber();
  }

  /** A slot of the provider was freed (on any node, this one included): its waiting workspaces ask again. */
  private freedElsewhere(provider: string): void {
    if (this.closed) return;
    this.notices.set(provider, (this.notices.get(provider) ?? 0) + 1);
    const waiting = this.waiting.get(provider);
    if (!waiting || waiting.size === 0) return;
    this.waiting.delete(provider);
    for (const workspaceId of waiting) this.wake(workspaceId);
  }

  override tryAcquire(provider: string, generationId: string, workspaceId: string): boolean {
    const limit = this.limitOf(provider);
    if (limit === undefined) return super.tryAcquire(provider, generationId, workspaceId);
    if (this.setOf(provider).has(generationId)) return true;
    if (this.granted.get(generationId) === provider) {
      this.granted.delete(generationId);
      this.clearPending(generationId);
      this.setOf(provider).add(generationId);
      this.providerOf.set(generationId, provider);
      return true;
    }
    let waiting = this.waiting.get(provider);
    if (!waiting) this.waiting.set(provider, (waiting = new Set()));
    waiting.add(workspaceId);
    const pendingKey = `${workspaceId}\n${provider}`;
    const pending = this.pendingOf.get(pendingKey);
    if (pending === undefined) {
      this.pendingOf.set(pendingKey, generationId);
      this.pendingKeyOf.set(generationId, pendingKey);
      this.ask(provider, generationId, workspaceId, limit);
    } else if (pending === generationId) {
      this.ask(provider, generationId, workspaceId, limit);
    }
    return false;
  }

  private clearPending(generationId: string): void {
    const key = this.pendingKeyOf.get(generationId);
    if (key === undefined) return;
    this.pendingKeyOf.delete(generationId);
    if (this.pendingOf.get(key) === generationId) this.pendingOf.delete(key);
  }

  override hold(provider: string, generationId: string): void {
    super.hold(provider, generationId);
    if (this.limitOf(provider) !== undefined) this.command(() => this.options.redis.sAdd(this.keyOf(provider), generationId));
  }

  override release(generationId: string): void {
    const provider = this.providerOf.get(generationId) ?? this.granted.get(generationId);
    this.granted.delete(generationId);
    this.clearPending(generationId);
    super.release(generationId);
    if (provider !== undefined && this.limitOf(provider) !== undefined) {
      this.command(() => this.options.redis.eval(RELEASE, { keys: [this.keyOf(provider)], arguments: [generationId, this.channel, provider] }));
    }
  }

  /** Stops the timers and closes the subscriber connection. */
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

  private ask(provider: string, generationId: string, workspaceId: string, limit: number): void {
    if (this.asking.has(generationId) || this.closed) return;
    this.asking.add(generationId);
    const noticesBefore = this.notices.get(provider) ?? 0;
    this.options.redis.eval(ACQUIRE, { keys: [this.keyOf(provider)], arguments: [generationId, String(limit)] }).then(
      (reply) => {
        this.asking.delete(generationId);
        if (Number(reply) === 1) {
          this.granted.set(generationId, provider);
          this.wake(workspaceId);
        } else {
          this.clearPending(generationId);
          // A slot freed while the ask was on its way: ask again now rather than at the poll.
          if ((this.notices.get(provider) ?? 0) !== noticesBefore) this.wake(workspaceId);
          else this.schedulePoll();
        }
      },
      (error: unknown) => {
        this.asking.delete(generationId);
        this.clearPending(generationId);
        this.options.logger.warn({ err: error, provider }, 'provider slot: Redis did not answer; trying again');
        this.schedulePoll();
      },
    );
  }

  /** Wakes every workspace waiting for a provider: each asks again for its jobs. */
  private schedulePoll(): void {
    if (this.pollTimer || this.closed) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      const waiting = [...this.waiting.values()].flatMap((set) => [...set]);
      this.waiting.clear();
      for (const workspaceId of new Set(waiting)) this.wake(workspaceId);
    }, this.pollMs);
  }

  private async sweep(): Promise<void> {
    try {
      for (const provider of [...this.held.keys()]) {
        if (this.limitOf(provider) === undefined) continue;
        const key = this.keyOf(provider);
        const members = await this.options.redis.sMembers(key);
        if (members.length === 0) continue;
        const stale = await this.options.finished(members);
        if (stale.length > 0 && await this.options.redis.sRem(key, stale) > 0) await this.options.redis.publish(this.channel, provider);
      }
    } catch (error) {
      this.options.logger.warn({ err: error }, 'sweeping stale provider slots failed; trying again later');
    }
  }

  private command(run: () => Promise<unknown>): void {
    run().catch((error: unknown) => this.options.logger.warn({ err: error }, 'provider slot: Redis command failed'));
  }

  private keyOf(provider: string): string {
    return `${this.options.prefix}provider-slots:${provider}`;
  }
}

/**
 * Of the generation ids holding slots, those whose slots are stale and that this node sweeps: the ended
 * jobs of the shards it owns (so each is swept by one node), and ids no longer in the database at all.
 */
export async function staleSlotsAmong(db: Database, ids: string[], owned: { shards: number[]; shardCount: number }): Promise<string[]> {
  const rows = await db.em().execute<Array<{ id: string }>>(
    `select v.id from jsonb_array_elements_text(?::jsonb) as v(id) left join generations g on g.id = v.id
     where g.id is null or (g.status not in ('queued', 'reserved', 'submitted', 'running')
       and ${shardOfSql('g.workspace_id')} in (select value::int4 from jsonb_array_elements_text(?::jsonb)))`,
    [JSON.stringify(ids), owned.shardCount, JSON.stringify(owned.shards)],
  );
  return rows.map((row) => row.id);
}

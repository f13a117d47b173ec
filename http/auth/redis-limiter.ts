import { createHash } from 'node:crypto';
import type { Clock } from '../../runtime/clock.ts';
import type { RedisClient } from '../../runtime/redis.ts';
import { windowOf, windowState, type RateLimiter, type RateWindow } from './limiter.ts';

// One round trip, atomic: count the hits and give a new window its expiry.
const HIT_SCRIPT = `
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;
const HIT_SHA = createHash('sha1').update(HIT_SCRIPT).digest('hex');

/** Hits of one counter and window made in the same turn of the event loop, counted by one script call. */
interface Batch {
  redisKey: string;
  ttl: string;
  resetAt: number;
  waiters: Array<{ limit: number; resolve(window: RateWindow): void; reject(error: unknown): void }>;
}

/**
 * Counters shared by every node through Redis (REDIS_URL); one key per counter and window. The hits of
 * a counter that arrive in the same turn of the event loop (a busy key's concurrent requests) go to
 * Redis together, as one INCRBY in one round trip, and each gets its own place in the count, so the
 * count stays exact and a busy key costs one Redis command per turn instead of one per request.
 */
export class RedisRateLimiter implements RateLimiter {
  private batches = new Map<string, Batch>();
  private scheduled = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly prefix: string,
  ) {}

  hit(key: string, limit: number, windowMs: number): Promise<RateWindow> {
    const now = this.clock.now();
    const { start, resetAt } = windowOf(now, windowMs);
    const redisKey = this.keyOf(key, start);
    let batch = this.batches.get(redisKey);
    if (!batch) {
      // The key outlives its window a little, so clocks slightly apart across nodes still share it.
      batch = { redisKey, ttl: String(resetAt - now + 5_000), resetAt, waiters: [] };
      this.batches.set(redisKey, batch);
      if (!this.scheduled) {
        this.scheduled = true;
        // After the I/O callbacks of this turn (uWS delivers many requests in one), not after each one.
        setImmediate(() => this.flush());
      }
    }
    const waiters = batch.waiters;
    return new Promise((resolve, reject) => {
      waiters.push({ limit, resolve, reject });
    });
  }

  async peek(key: string, limit: number, windowMs: number): Promise<RateWindow> {
    const { start, resetAt } = windowOf(this.clock.now(), windowMs);
    const value = await this.redis.get(this.keyOf(key, start));
    return windowState(value === null ? 0 : Number(value), limit, resetAt);
  }

  async reset(key: string, windowMs: number): Promise<void> {
    const { start } = windowOf(this.clock.now(), windowMs);
    await this.redis.del(this.keyOf(key, start));
  }

  private flush(): void {
    this.scheduled = false;
    const batches = this.batches;
    this.batches = new Map();
    for (const batch of batches.values()) void this.count(batch);
  }

  private async count(batch: Batch): Promise<void> {
    const n = batch.waiters.length;
    const options = { keys: [batch.redisKey], arguments: [batch.ttl, String(n)] };
    let total: number;
    try {
      let reply: unknown;
      try {
        reply = await this.redis.evalSha(HIT_SHA, options);
      } catch (error) {
        if (!/NOSCRIPT/.test((error as Error).message)) throw error;
        reply = await this.redis.eval(HIT_SCRIPT, options);
      }
      total = Number(reply);
    } catch (error) {
      for (const waiter of batch.waiters) waiter.reject(error);
      return;
    }
    // The batch holds counts total-n+1 … total, in the order its requests arrived.
    let count = total - n;
    for (const waiter of batch.waiters) waiter.resolve(windowState(++count, waiter.limit, batch.resetAt));
  }

  private keyOf(key: string, windowStart: number): string {
    return `${this.prefix}rl:${key}:${windowStart}`;
  }
}

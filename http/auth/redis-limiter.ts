import { createHash } from 'node:crypto';
import type { Clock } from '../../runtime/clock.ts';
import type { RedisClient } from '../../runtime/redis.ts';
import { windowOf, windowState, type RateLimiter, type RateWindow } from './limiter.ts';

// One round trip, atomic: count the hit and give a new window its expiry.
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;
const HIT_SHA = createHash('sha1').update(HIT_SCRIPT).digest('hex');

/** Counters shared by every node through Redis (REDIS_URL); one key per counter and window. */
export class RedisRateLimiter implements RateLimiter {
  constructor(private readonly redis: RedisClient, private readonly clock: Clock, private readonly prefix: string) {}

  async hit(key: string, limit: number, windowMs: number): Promise<RateWindow> {
    const now = this.clock.now();
    const { start, resetAt } = windowOf(now, windowMs);
    // The key outlives its window a little, so clocks slightly apart across nodes still share it.
    const ttl = String(resetAt - now + 5_000);
    const redisKey = this.keyOf(key, start);
    let count: unknown;
    try {
      count = await this.redis.evalSha(HIT_SHA, { keys: [redisKey], arguments: [ttl] });
    } catch (error) {
      if (!/NOSCRIPT/.test((error as Error).message)) throw error;
      count = await this.redis.eval(HIT_SCRIPT, { keys: [redisKey], arguments: [ttl] });
    }
    return windowState(Number(count), limit, resetAt);
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

  private keyOf(key: string, windowStart: number): string {
    return `${this.prefix}rl:${key}:${windowStart}`;
  }
}

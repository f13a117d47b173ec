import { createHash } from 'node:crypto';
import type { RedisClient } from '../../runtime/redis.ts';
import { AttemptContentionError, type AttemptChange, type AttemptRecord, type AttemptStore } from './attempt-store.ts';

// Compare and set, in one round trip: the new value is written only if the key still holds the value the
// change was computed from (an absent key is ''); otherwise the current value is returned to try again.
const CAS_SCRIPT = `
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return {0, current} end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {1, ''}`;
const CAS_SHA = createHash('sha1').update(CAS_SCRIPT).digest('hex');

/** Tries before a change gives up on a key others keep changing. */
const MAX_TRIES = 16;

/**
 * Records shared by every node through Redis (REDIS_URL), one string key each ("count:last"), expiring
 * ttlMs after their last change. An update reads the key, computes the change in the process, and writes
 * it only if nobody changed the key meanwhile (a compare-and-set script), else computes again from what
 * the key holds now: the policy stays one function in TypeScript for both back ends.
 */
export class RedisAttemptStore implements AttemptStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  async update<T>(key: string, ttlMs: number, change: (current: AttemptRecord | undefined) => AttemptChange<T>): Promise<T> {
    const redisKey = this.keyOf(key);
    let current = (await this.redis.get(redisKey)) ?? '';
    for (let tries = 0; tries < MAX_TRIES; tries++) {
      const { next, result } = change(decode(current));
      if (!next) return result;
      const reply = await this.cas(redisKey, current, `${next.count}:${next.last}`, ttlMs);
      if (Number(reply[0]) === 1) return result;
      current = String(reply[1]);
    }
    throw new AttemptContentionError(key);
  }

  async delete(key: string): Promise<void> {
    await this.redis.del(this.keyOf(key));
  }

  private async cas(redisKey: string, expected: string, value: string, ttlMs: number): Promise<unknown[]> {
    const options = { keys: [redisKey], arguments: [expected, value, String(Math.max(1, Math.ceil(ttlMs)))] };
    try {
      return (await this.redis.evalSha(CAS_SHA, options)) as unknown[];
    } catch (error) {
      if (!/NOSCRIPT/.test((error as Error).message)) throw error;
      return (await this.redis.eval(CAS_SCRIPT, options)) as unknown[];
    }
  }

  private keyOf(key: string): string {
    return `${this.prefix}attempts:${key}`;
  }
}

function decode(value: string): AttemptRecord | undefined {
  const match = /^(\d+):(\d+)$/.exec(value);
  return match ? { count: Number(match[1]), last: Number(match[2]) } : undefined;
}

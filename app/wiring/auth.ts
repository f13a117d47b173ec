import type { Config } from '../../runtime/config.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import type { Database } from '../../persistence/database.ts';
import { MemoryRateLimiter, type RateLimiter } from '../../http/auth/limiter.ts';
import { RedisRateLimiter } from '../../http/auth/redis-limiter.ts';
import { MemoryAttemptStore, type AttemptStore } from '../../http/auth/attempt-store.ts';
import { RedisAttemptStore } from '../../http/auth/redis-attempt-store.ts';
import { KeyCache } from '../../http/auth/key-cache.ts';
import { KeyUsageRecorder } from '../../http/auth/key-usage.ts';
import type { ServedCatalog } from './catalog.ts';
import type { SharedBackEnds } from './shared-back-ends.ts';

export interface Auth {
  limiter: RateLimiter;
  loginAttempts: AttemptStore;
  keyCache: KeyCache;
  keyUsage: KeyUsageRecorder;
}

/** What authenticates and counts each request: the rate limiter, login attempts, the API key cache and the key usage recorder. */
export function buildAuth(
  stack: CleanupStack,
  config: Config,
  db: Database,
  clock: Clock,
  logger: Logger,
  shared: SharedBackEnds,
  catalog: ServedCatalog,
): Auth {
  const { redis, keyBus } = shared;
  const limiter: RateLimiter = redis ? new RedisRateLimiter(redis, clock, config.redisKeyPrefix) : new MemoryRateLimiter(clock);
  const loginAttempts: AttemptStore = redis ? new RedisAttemptStore(redis, config.redisKeyPrefix) : new MemoryAttemptStore(clock);
  const keyCache = new KeyCache({ db, clock, logger, plans: () => catalog.source.current, bus: keyBus });
  keyBus?.listen((keyHash) => keyCache.drop(keyHash));
  // Cached key records carry their plan's rate limit: read again with the new plans.
  catalog.onChanged(() => keyCache.clear());
  // Its last counts are written when it closes, once the requests and the actors are done.
  const keyUsage = new KeyUsageRecorder({ db, clock, logger });
  stack.defer(() => keyUsage.close());
  return { limiter, loginAttempts, keyCache, keyUsage };
}

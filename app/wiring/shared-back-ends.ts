import type { Config } from '../../runtime/config.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import { closeRedis, connectRedis, type RedisClient } from '../../runtime/redis.ts';
import { LiveEvents } from '../../runtime/live-events.ts';
import { RedisKeyInvalidationBus } from '../../http/auth/key-invalidation.ts';
import { toGenerationDetailOut } from '../../http/routes/generations/shape.ts';
import { StartupError } from './startup-error.ts';

export interface SharedBackEnds {
  redis: RedisClient | undefined;
  /** Live streams: transitions published after commit, in process, or through Redis pub/sub (docs/streaming.md). */
  live: LiveEvents;
  /** With Redis, a changed API key leaves every node's key cache at once. */
  keyBus: RedisKeyInvalidationBus | undefined;
}

/** Shared back ends when REDIS_URL is set, in-process ones otherwise: chosen here, once. */
export async function buildSharedBackEnds(stack: CleanupStack, config: Config, clock: Clock, logger: Logger): Promise<SharedBackEnds> {
  const startLiveEvents = async (client: RedisClient | undefined) => {
    const live = await LiveEvents.start({
      present: toGenerationDetailOut,
      now: () => clock.now(),
      logger,
      redis: client,
      channel: `${config.redisKeyPrefix}live-generations`,
    });
    stack.defer(() => live.close());
    return live;
  };
  if (!config.redisUrl) return { redis: undefined, live: await startLiveEvents(undefined), keyBus: undefined };
  try {
    const redis = await connectRedis(config.redisUrl, logger);
    stack.defer(() => closeRedis(redis));
    const live = await startLiveEvents(redis);
    const keyBus = await RedisKeyInvalidationBus.connect(redis, `${config.redisKeyPrefix}api-key-invalidations`, logger);
    stack.defer(() => keyBus.close());
    return { redis, live, keyBus };
  } catch (error) {
    throw new StartupError(`Redis (REDIS_URL): ${(error as Error).message}`);
  }
}

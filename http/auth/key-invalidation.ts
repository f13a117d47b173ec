import type { Logger } from '../../runtime/logger.ts';
import { closeRedis, type RedisClient } from '../../runtime/redis.ts';
import type { KeyInvalidationBus } from './key-cache.ts';

/** API key invalidations over a Redis channel, so every node drops a changed key from its cache at once. */
export class RedisKeyInvalidationBus implements KeyInvalidationBus {
  private listeners: Array<(keyHash: string) => void> = [];

  private constructor(
    private readonly publisher: RedisClient,
    private readonly subscriber: RedisClient,
    private readonly channel: string,
  ) {}

  static async connect(redis: RedisClient, channel: string, logger: Logger): Promise<RedisKeyInvalidationBus> {
    // A subscribed connection can do nothing else, so it gets its own.
    const subscriber = redis.duplicate();
    subscriber.on('error', (error: Error) => logger.warn({ err: error }, 'redis subscriber connection error'));
    await subscriber.connect();
    const bus = new RedisKeyInvalidationBus(redis, subscriber, channel);
    await subscriber.subscribe(channel, (message) => {
      for (const listener of bus.listeners) listener(message);
    });
    return bus;
  }

  listen(listener: (keyHash: string) => void): void {
    this.listeners.push(listener);
  }

  async publish(keyHash: string): Promise<void> {
    await this.publisher.publish(this.channel, keyHash);
  }

  async close(): Promise<void> {
    this.listeners = [];
    await closeRedis(this.subscriber);
  }
}

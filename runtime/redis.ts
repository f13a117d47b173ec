import type { createClient } from 'redis';
import type { Logger } from './logger.ts';

export type RedisClient = ReturnType<typeof createClient>;

const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Connects to Redis (REDIS_URL). Commands fail fast while the connection is down instead of queueing,
 * so a Redis outage shows as errors the callers handle, not as hung requests.
 */
export async function connectRedis(url: string, logger: Logger): Promise<RedisClient> {
  // Loaded on first use: without REDIS_URL the client (about 550 modules) is never needed.
  const { createClient } = await import('redis');
  const client = createClient({
    url,
    disableOfflineQueue: true,
    socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 2_000) },
  });
  let connected = false;
  client.on('error', (error: Error) => {
    if (connected) logger.warn({ err: error }, 'redis connection error');
  });
  const timeout = new Promise<never>((_, reject) => {
    setTimeout(() => reject(new Error(`could not connect to Redis within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS).unref();
  });
  const connecting = client.connect();
  connecting.catch(() => {});
  try {
    await Promise.race([connecting, timeout]);
  } catch (error) {
    try {
      client.destroy();
    } catch {
      /* already closed */
    }
    throw error;
  }
  connected = true;
  return client;
}

/** Closes a client after its pending commands; a client already closed or destroyed is left as it is. */
export async function closeRedis(client: RedisClient | undefined): Promise<void> {
  if (!client?.isOpen) return;
  await client.close();
}

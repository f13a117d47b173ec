import { randomBytes } from 'node:crypto';
import { createKey, signUp } from '../lib/accounts.ts';
import type { BenchContext, Scenario, ScenarioOutcome } from '../lib/types.ts';

/** High enough that no run reaches it: each measured run uses a key of its own, and a run is ~10 s. */
const REQUESTS_PER_MINUTE = '1000000';

/**
 * The cost of the keyed path: `GET /v1/generations/emergency-stop` with `Authorization: Bearer <key>`.
 * Each request goes through the key cache (SHA-256 of the key, one map lookup), the per-key rate limit
 * (counted in process or in Redis, with its X-RateLimit-* headers), the access check, usage counting,
 * and a small read (the operator switch, kept in memory and refreshed from the database every 2 s).
 * No database query per request: reads that query the database are bound by it, not by this path.
 * The service runs in its own process with a per-key limit the run cannot reach (RATE_LIMIT_FREE), so it
 * measures the cost of limiting, not 429s.
 */
async function keyedRead(ctx: BenchContext, limiter: 'memory' | 'redis'): Promise<ScenarioOutcome> {
  const redisUrl = process.env.BENCH_REDIS_URL?.trim() || 'redis://127.0.0.1:6379';
  const env: Record<string, string> = { RATE_LIMIT_FREE: REQUESTS_PER_MINUTE };
  if (limiter === 'redis') Object.assign(env, { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: `bench:${randomBytes(6).toString('hex')}:` });
  const server = await ctx.startService(`service (${limiter === 'redis' ? 'Redis' : 'in-process'} rate limiter)`, env);
  try {
    const account = await signUp(server.url);
    // A key for the warm-up and another for the measured run(s), so neither inherits the other's window.
    const [warmKey, key] = await Promise.all([
      createKey(server.url, account, ['generations.read'], 'bench warm-up'),
      createKey(server.url, account, ['generations.read'], 'bench'),
    ]);
    const path = '/v1/generations/emergency-stop';
    const probe = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
    await probe.arrayBuffer();
    if (probe.status !== 200 || probe.headers.get('x-ratelimit-limit') !== REQUESTS_PER_MINUTE) {
      throw new Error(`probe: ${probe.status}, X-RateLimit-Limit ${probe.headers.get('x-ratelimit-limit')}`);
    }
    const title = `service GET /v1/generations/emergency-stop, Bearer key, ${limiter === 'redis' ? 'Redis' : 'in-process'} limiter`;
    await ctx.load({
      server,
      path,
      headers: { authorization: `Bearer ${warmKey}` },
      title: `${title} (warm-up)`,
      durationS: ctx.options.warmupS,
      skipWarmup: true,
    });
    const result = await ctx.load({ server, path, headers: { authorization: `Bearer ${key}` }, title, skipWarmup: true });
    return {
      result,
      target: 0.5,
      notes: limiter === 'redis' ? [`Redis at ${new URL(redisUrl).host}`] : [],
    };
  } finally {
    await server.stop();
  }
}

export const keyedReadMemory: Scenario = {
  name: 'keyed-read',
  description:
    'GET /v1/generations/emergency-stop with a Bearer API key (key cache, in-process rate limit, access check, usage count, small in-memory read) vs GET / on raw uWS',
  run: (ctx) => keyedRead(ctx, 'memory'),
};

export const keyedReadRedis: Scenario = {
  name: 'keyed-read-redis',
  description: 'the same with the rate limit in Redis (REDIS_URL, one round trip per request) vs GET / on raw uWS',
  run: (ctx) => keyedRead(ctx, 'redis'),
};

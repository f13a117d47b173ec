import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';

const backend = process.env.TEST_REDIS_URL ? 'redis' : 'memory';

function get(server: TestServer, key: string, path: string) {
  return server.json(path, { headers: withKey(key) });
}

function limitHeaders(res: { headers: Headers }) {
  return {
    limit: res.headers.get('x-ratelimit-limit'),
    remaining: res.headers.get('x-ratelimit-remaining'),
    reset: res.headers.get('x-ratelimit-reset'),
  };
}

t.test(`per-key limit per minute with headers on every keyed response, then 429 (${backend} limiter)`, async (t) => {
  // 30 seconds into a minute: the window resets in 30 seconds.
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 30));
  const server = await startTestServer(t, { clock, env: { RATE_LIMIT_FREE: '5' } });
  t.equal(server.services.limiter.constructor.name, backend === 'redis' ? 'RedisRateLimiter' : 'MemoryRateLimiter', 'the back end config asked for');
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId);
  const path = `/v1/workspaces/${owner.workspaceId}`;

  for (let i = 1; i <= 5; i++) {
    const res = await get(server, key.key, path);
    t.equal(res.status, 200, `request ${i}`);
    t.same(limitHeaders(res), { limit: '5', remaining: String(5 - i), reset: '30' }, `headers of request ${i}`);
  }
  const limited = await get(server, key.key, path);
  t.equal(limited.status, 429);
  t.equal(limited.body.error.code, 'rate_limited');
  t.match(limited.body.error.message, /5 requests per minute/);
  t.same(limitHeaders(limited), { limit: '5', remaining: '0', reset: '30' });
  t.equal(limited.headers.get('retry-after'), '30', 'Retry-After in seconds, the same as X-RateLimit-Reset');

  clock.advance(29_500);
  const still = await get(server, key.key, path);
  t.equal(still.status, 429);
  t.equal(still.headers.get('retry-after'), '1', 'rounded up to whole seconds, never 0');

  clock.advance(500);
  const next = await get(server, key.key, path);
  t.equal(next.status, 200, 'a new window');
  t.same(limitHeaders(next), { limit: '5', remaining: '4', reset: '60' });

  const session = await server.json(path, { headers: withCookie(owner.cookie) });
  t.equal(session.status, 200);
  t.equal(session.headers.get('x-ratelimit-limit'), null, 'session requests carry no key limit headers');
});

t.test('limit headers are on keyed error responses too (400, 403)', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const stranger = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['assets.read']);
  const cases: Array<[string, RequestInit, number]> = [
    [`/v1/workspaces/${stranger.workspaceId}`, {}, 403],
    [`/v1/api-keys?workspaceId=${owner.workspaceId}`, {}, 403],
    ['/v1/workspaces', { method: 'POST', body: JSON.stringify({ name: 'x' }) }, 403],
    // A key's request the route admits, with a query it refuses (a people-only route refuses a key first: 403).
    [`/v1/assets?workspaceId=${owner.workspaceId}&limit=oops`, {}, 400],
  ];
  let remaining = 60;
  for (const [path, init, status] of cases) {
    const res = await server.json(path, { ...init, headers: withKey(key.key) });
    t.equal(res.status, status, path);
    remaining--;
    t.same(limitHeaders(res).limit, '60', `${path}: free plan default 60`);
    t.equal(limitHeaders(res).remaining, String(remaining), `${path}: counted`);
    t.match(limitHeaders(res).reset, /^\d+$/);
  }
  const unknown = await server.json('/v1/workspaces/x', { headers: withKey(`gs_live_${'x'.repeat(64)}`) });
  t.equal(unknown.status, 401);
  t.equal(unknown.headers.get('x-ratelimit-limit'), null, 'no headers when the key is not valid');
});

t.test('the limit follows the workspace plan and each key counts alone', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
  const server = await startTestServer(t, { clock, env: { RATE_LIMIT_FREE: '2', RATE_LIMIT_PRO: '4', RATE_LIMIT_TEAM: '6' } });
  const free = await signUp(server);
  const pro = await signUp(server);
  const team = await signUp(server);
  await server.services.db.em().execute(`update workspaces set plan = 'pro' where id = ?`, [pro.workspaceId]);
  await server.services.db.em().execute(`update workspaces set plan = 'team' where id = ?`, [team.workspaceId]);
  for (const [user, limit] of [
    [free, 2],
    [pro, 4],
    [team, 6],
  ] as const) {
    const a = await createKey(server, user.cookie, user.workspaceId);
    const b = await createKey(server, user.cookie, user.workspaceId);
    const path = `/v1/workspaces/${user.workspaceId}`;
    for (let i = 0; i < limit; i++) t.equal((await get(server, a.key, path)).status, 200);
    const over = await get(server, a.key, path);
    t.equal(over.status, 429, `key a over its ${limit}`);
    t.equal(over.headers.get('x-ratelimit-limit'), String(limit));
    const other = await get(server, b.key, path);
    t.equal(other.status, 200, 'key b of the same workspace has its own count');
    t.equal(other.headers.get('x-ratelimit-remaining'), String(limit - 1));
  }
});

t.test('a limited key stays limited across the cache: revoking it meanwhile still gives 401', async (t) => {
  const server = await startTestServer(t, { env: { RATE_LIMIT_FREE: '1' } });
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId);
  const path = `/v1/workspaces/${owner.workspaceId}`;
  t.equal((await get(server, key.key, path)).status, 200);
  t.equal((await get(server, key.key, path)).status, 429);
  await server.json(`/v1/api-keys/${key.id}`, { method: 'DELETE', headers: withCookie(owner.cookie) });
  const res = await get(server, key.key, path);
  t.equal(res.status, 401, 'authentication comes before the limit');
});

t.test(
  'with Redis, nodes share one count and drop revoked keys at once',
  { skip: !(process.env.TEST_REDIS_URL && process.env.TEST_DATABASE_URL) && 'needs TEST_REDIS_URL and TEST_DATABASE_URL' },
  async (t) => {
    const database = await freshDatabaseUrl();
    t.teardown(() => database.drop());
    const prefix = `test:shared:${Date.now()}:${Math.random().toString(36).slice(2)}:`;
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
    const env = { REDIS_KEY_PREFIX: prefix, RATE_LIMIT_FREE: '4' };
    const one = await startTestServer(t, { clock, env, databaseUrl: database.url });
    const two = await startTestServer(t, { clock, env, databaseUrl: database.url });
    const owner = await signUp(one);
    const key = await createKey(one, owner.cookie, owner.workspaceId);
    const path = `/v1/workspaces/${owner.workspaceId}`;
    const statuses: number[] = [];
    for (const node of [one, two, one, two, one, two]) statuses.push((await get(node, key.key, path)).status);
    t.same(statuses, [200, 200, 200, 200, 429, 429], 'four in all, whichever node answers');

    clock.advance(60_000);
    t.equal((await get(two, key.key, path)).status, 200, 'node two has the key cached');
    const revoke = await one.json(`/v1/api-keys/${key.id}`, { method: 'PATCH', headers: withCookie(owner.cookie), body: JSON.stringify({ revoked: true }) });
    t.equal(revoke.status, 200);
    let status = 0;
    // The invalidation travels over Redis pub/sub; it lands within a moment, well before the 60 s cache TTL.
    for (let i = 0; i < 100 && status !== 401; i++) {
      status = (await get(two, key.key, path)).status;
      if (status !== 401) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    t.equal(status, 401, 'node two refuses the revoked key without waiting for its cache to expire');
  },
);

t.test(
  'with Redis down, keyed requests are served unlimited rather than refused',
  { skip: !process.env.TEST_REDIS_URL && 'needs TEST_REDIS_URL' },
  async (t) => {
    const server = await startTestServer(t, { env: { RATE_LIMIT_FREE: '1' } });
    const owner = await signUp(server);
    const key = await createKey(server, owner.cookie, owner.workspaceId);
    const path = `/v1/workspaces/${owner.workspaceId}`;
    t.equal((await get(server, key.key, path)).status, 200);
    t.equal((await get(server, key.key, path)).status, 429);
    server.services.redis!.destroy();
    for (let i = 0; i < 3; i++) {
      const res = await get(server, key.key, path);
      t.equal(res.status, 200, 'served');
      t.equal(res.headers.get('x-ratelimit-limit'), null, 'without limit headers, as no limit was applied');
    }
  },
);

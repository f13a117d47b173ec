import t from 'tap';
import { ApiError, createClient, retryDelayMs, parseRetryAfter } from '@generation-service/client';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer } from '../helpers/server.ts';
import { recordingFetch, sdkTenant, thrown, type Sent } from './support.ts';

const TEXT = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'Say hello' } } as const;

t.test('a 429 is retried after Retry-After, with the same Idempotency-Key, and a bounded number of times', async (t) => {
  // 30 seconds into a minute: a key over its limit is told Retry-After: 30.
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 30));
  const server = await startTestServer(t, { clock, env: { RATE_LIMIT_FREE: '3' } });
  t.equal(
    server.services.limiter.constructor.name,
    process.env.TEST_REDIS_URL ? 'RedisRateLimiter' : 'MemoryRateLimiter',
    'the limiter of the back end under test',
  );
  // The SDK waits through `sleep`; here waiting moves the service's clock instead of real time.
  const waits: number[] = [];
  const { sdk, sent, key, workspaceId } = await sdkTenant(server, {
    sleep: async (ms) => {
      waits.push(ms);
      clock.advance(ms);
    },
  });

  for (let i = 0; i < 3; i++) await sdk.models.list();
  t.same(
    sent.map((s) => s.status),
    [200, 200, 200],
    'the limit of 3 used up',
  );

  const created = await sdk.generations.create(TEXT);
  t.equal(created.status, 'queued', 'the create went through on its retry');
  const creates = sent.filter((s) => s.url.pathname === '/v1/generations');
  t.same(
    creates.map((s) => s.status),
    [429, 201],
    'refused once, then created',
  );
  t.same(waits, [30_000], 'waited what Retry-After said');
  t.ok(creates[0]!.headers.get('idempotency-key'), 'the create had a key');
  t.equal(creates[1]!.headers.get('idempotency-key'), creates[0]!.headers.get('idempotency-key'), 'the retry sent the same key');
  t.equal(creates[1]!.body, creates[0]!.body, 'and the same body');

  // In the new window (12:01:00): the create took 1 of 3; use up the rest, then a client that may retry
  // twice, waiting at most 5 s, on a clock that does not move: three answers 429, then ApiError.
  await sdk.models.list();
  await sdk.models.list();
  const stuckSent: Sent[] = [];
  const stuckWaits: number[] = [];
  const bounded = createClient({
    baseUrl: server.url,
    apiKey: key,
    workspaceId,
    maxRetries: 2,
    maxRetryDelayMs: 5_000,
    fetch: recordingFetch(stuckSent),
    sleep: async (ms) => {
      stuckWaits.push(ms);
    },
  });
  const error = await thrown(t, () => bounded.generations.get(created.id));
  t.ok(error instanceof ApiError);
  t.match(error, { code: 'rate_limited', status: 429, retryAfterMs: 60_000 });
  t.match(error.requestId, /\S/);
  t.equal(stuckSent.length, 3, 'the first try and 2 retries');
  t.same(stuckWaits, [5_000, 5_000], 'Retry-After (60 s) capped at maxRetryDelayMs');

  const noRetry = createClient({
    baseUrl: server.url,
    apiKey: key,
    workspaceId,
    maxRetries: 0,
    fetch: recordingFetch(stuckSent),
    sleep: async () => {
      t.fail('no wait');
    },
  });
  t.match(await thrown(t, () => noRetry.models.list()), { code: 'rate_limited', status: 429 }, 'maxRetries 0: the 429 at once');
  t.equal(stuckSent.length, 4);

  clock.advance(60_000);
  t.equal((await bounded.generations.get(created.id)).id, created.id, 'a new window serves it');
});

t.test('a 503 is retried too; the delay without Retry-After is a capped exponential backoff', async (t) => {
  // The service answers 503 service_unavailable with Retry-After when it cannot reach its database; an
  // answer of that kind is made here by a fetch in front of a real server, the second try goes through.
  const server = await startTestServer(t);
  let refusals = 1;
  const waits: number[] = [];
  const { sdk, sent } = await sdkTenant(server, {
    sleep: async (ms) => {
      waits.push(ms);
    },
    fetch: async (request) => {
      const seen = { method: request.method, url: new URL(request.url), headers: request.headers, body: '', requestId: 'req_local' };
      if (refusals-- > 0) {
        sent.push({ ...seen, status: 503 });
        return Response.json(
          { error: { code: 'service_unavailable', message: 'retry shortly', requestId: 'req_local' } },
          { status: 503, headers: { 'retry-after': '2' } },
        );
      }
      const response = await fetch(request);
      sent.push({ ...seen, status: response.status });
      return response;
    },
  });
  const models = await sdk.models.list();
  t.ok(models.length > 0);
  t.same(
    sent.map((s) => s.status),
    [503, 200],
  );
  t.same(waits, [2_000]);

  t.equal(parseRetryAfter('7'), 7_000);
  t.equal(parseRetryAfter(new Date(Date.UTC(2026, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2026, 0, 1)), 10_000, 'an HTTP date');
  t.equal(parseRetryAfter(null), undefined);
  t.equal(parseRetryAfter('soon'), undefined);
  const backoff = [0, 1, 2, 3].map((attempt) => retryDelayMs(null, attempt, 1_500));
  t.ok(backoff[0]! >= 500 && backoff[0]! <= 550, `first backoff ${backoff[0]}`);
  t.ok(backoff[1]! >= 1_000 && backoff[1]! <= 1_100, `second backoff ${backoff[1]}`);
  t.same(backoff.slice(2), [1_500, 1_500], 'capped');
  t.equal(retryDelayMs('120', 0, 30_000), 30_000, 'Retry-After capped too');
});

import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, moneyOf, serverQuery } from './flow.ts';
import { IDEMPOTENCY_PURGE_INTERVAL_MS, purgeExpiredIdempotencyKeys } from '../../actors/workspace/idempotency-retention.ts';
import { eventually } from '../helpers/eventually.ts';

t.test('Idempotency-Key: replay, conflict, concurrent requests, and scope to the workspace', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const user = await signUp(server);
  const other = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const { key: otherKey } = await createKey(server, other.cookie, other.workspaceId, ['generations.write', 'generations.read']);
  const query = serverQuery(server);
  const jobsWithKey = async (workspaceId: string, idempotencyKey: string) =>
    Number(
      (
        await query<{ n: string }>('select count(*)::int8 as n from generations where workspace_id = ? and idempotency_key = ?', [workspaceId, idempotencyKey])
      )[0]!.n,
    );

  t.test('replay: same key and same body gives the first response again, and no second job', async (t) => {
    const body = { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: 'a kite', numImages: 2, seed: 3 } };
    const first = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'order-1' });
    t.equal(first.status, 201, JSON.stringify(first.body));
    t.equal(first.headers.get('idempotent-replayed'), null, 'the first response is not a replay');
    const replay = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'order-1' });
    t.equal(replay.status, 201);
    t.equal(replay.headers.get('idempotent-replayed'), 'true');
    t.same(replay.body, first.body, 'the same body, byte for byte as JSON');
    // The same body with its keys in another order is the same request.
    const reordered = await createGeneration(
      server,
      key,
      user.workspaceId,
      { params: { seed: 3, numImages: 2, prompt: 'a kite' }, model: 'local/image-fast', mode: 'text_to_image' },
      { 'idempotency-key': 'order-1' },
    );
    t.equal(reordered.status, 201);
    t.equal(reordered.headers.get('idempotent-replayed'), 'true');
    t.equal(reordered.body.id, first.body.id);
    t.equal(await jobsWithKey(user.workspaceId, 'order-1'), 1, 'one job');
    const reserves = await query<{ n: string }>(`select count(*)::int8 as n from credit_ledger where workspace_id = ? and kind = 'reserve'`, [
      user.workspaceId,
    ]);
    t.equal(Number(reserves[0]!.n), 1, 'credits were reserved once');
    const money = await moneyOf(query, user.workspaceId);
    t.equal(money.available, 92, 'eight credits taken for one job of two images, not three times that');
    t.equal(money.ledgerAvailable, money.available);
  });

  t.test('conflict: same key, different body is 409 and makes nothing', async (t) => {
    const first = await createGeneration(
      server,
      key,
      user.workspaceId,
      { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'one' } },
      { 'idempotency-key': 'order-2' },
    );
    t.equal(first.status, 201);
    const reserves = async () =>
      Number(
        (await query<{ n: string }>(`select count(*)::int8 as n from credit_ledger where workspace_id = ? and kind = 'reserve'`, [user.workspaceId]))[0]!.n,
      );
    const before = await reserves();
    const conflict = await createGeneration(
      server,
      key,
      user.workspaceId,
      { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'two' } },
      { 'idempotency-key': 'order-2' },
    );
    t.equal(conflict.status, 409);
    t.equal(conflict.body.error?.code, 'conflict');
    t.match(conflict.body.error?.message, /different request body/);
    t.equal(await jobsWithKey(user.workspaceId, 'order-2'), 1);
    t.equal(await reserves(), before, 'no credit was reserved for the refused request');
  });

  t.test('concurrent: ten identical requests at once make one job; the others are 409 or replays of it', async (t) => {
    const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'at once' } };
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'order-3' })),
    );
    const fresh = responses.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') !== 'true');
    t.equal(fresh.length, 1, 'exactly one request made the job');
    for (const r of responses) {
      if (r === fresh[0]) continue;
      if (r.status === 201) {
        t.equal(r.headers.get('idempotent-replayed'), 'true');
        t.same(r.body, fresh[0]!.body, 'a replay of the one job');
      } else {
        t.equal(r.status, 409);
        t.equal(r.body.error?.code, 'conflict');
        t.match(r.body.error?.message, /still being processed/);
      }
    }
    t.equal(await jobsWithKey(user.workspaceId, 'order-3'), 1, 'one job');
  });

  t.test('scope: the same key in another workspace is another request', async (t) => {
    const mine = await createGeneration(
      server,
      key,
      user.workspaceId,
      { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'scoped' } },
      { 'idempotency-key': 'order-4' },
    );
    const theirs = await createGeneration(
      server,
      otherKey,
      other.workspaceId,
      { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'scoped' } },
      { 'idempotency-key': 'order-4' },
    );
    t.equal(mine.status, 201);
    t.equal(theirs.status, 201);
    t.equal(theirs.headers.get('idempotent-replayed'), null, "not a replay of the other workspace's response");
    t.not(theirs.body.id, mine.body.id);
    t.equal(theirs.body.workspaceId, other.workspaceId);
    t.equal(await jobsWithKey(other.workspaceId, 'order-4'), 1);
    // And with a body of its own: not a conflict with the first workspace's key either.
    const differs = await createGeneration(
      server,
      otherKey,
      other.workspaceId,
      { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'other' } },
      { 'idempotency-key': 'order-1' },
    );
    t.equal(differs.status, 201);
  });

  t.test('a malformed key is a validation error', async (t) => {
    const bad = await createGeneration(
      server,
      key,
      user.workspaceId,
      { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'x' } },
      { 'idempotency-key': 'k'.repeat(256) },
    );
    t.equal(bad.status, 400);
    t.equal(bad.body.error?.code, 'validation_error');
    t.match(bad.body.error?.message, /Idempotency-Key/);
  });
});

t.test('a replay after the workspace actor was stopped comes from the stored key, not from memory', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0', ACTOR_IDLE_MS: '50' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'stored' } };
  const first = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'stored-1' });
  t.equal(first.status, 201);
  // Once its job is done the workspace actor is idle, and the sweep stops it.
  await eventually(() => !server.services.actors.isLive('ws', user.workspaceId), { what: 'the sweep', timeoutMs: 15_000, everyMs: 25 });
  t.notOk(server.services.actors.isLive('ws', user.workspaceId), 'the workspace actor was stopped');

  const replay = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'stored-1' });
  t.equal(replay.status, 201, JSON.stringify(replay.body));
  t.equal(replay.headers.get('idempotent-replayed'), 'true');
  t.same(replay.body, first.body);
  const conflict = await createGeneration(server, key, user.workspaceId, { ...body, params: { prompt: 'other' } }, { 'idempotency-key': 'stored-1' });
  t.equal(conflict.status, 409);
  const [count] = await serverQuery(server)<{ n: string }>('select count(*)::int8 as n from generations where workspace_id = ?', [user.workspaceId]);
  t.equal(Number(count!.n), 1);
});

t.test('a key is kept 24 hours: after that the same key and body make a new job', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 8, 1, 8, 0, 0));
  const server = await startTestServer(t, { clock, env: { LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_FREE: '100000' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'daily' } };
  const first = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'daily-1' });
  t.equal(first.status, 201);
  clock.advance(24 * 3_600_000 - 1);
  const replay = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'daily-1' });
  t.equal(replay.headers.get('idempotent-replayed'), 'true', 'a millisecond before 24 hours: a replay');
  t.equal(replay.body.id, first.body.id);
  clock.advance(1);
  const fresh = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'daily-1' });
  t.equal(fresh.status, 201, JSON.stringify(fresh.body));
  t.equal(fresh.headers.get('idempotent-replayed'), null, 'after 24 hours: a new request');
  t.not(fresh.body.id, first.body.id);
  const again = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'daily-1' });
  t.equal(again.headers.get('idempotent-replayed'), 'true', 'and the key now replays the new job');
  t.equal(again.body.id, fresh.body.id);
  const [count] = await serverQuery(server)<{ n: string }>('select count(*)::int8 as n from generations where workspace_id = ?', [user.workspaceId]);
  t.equal(Number(count!.n), 2);
});

t.test('stored keys past their 24 hours are purged by the service, a page at a time; keys still in their day stay', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 8, 1, 8, 0, 0));
  const server = await startTestServer(t, { clock, env: { LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_FREE: '100000' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const query = serverQuery(server);
  const stored = async () =>
    (await query<{ key: string }>('select key from idempotency_keys where workspace_id = ? order by key', [user.workspaceId])).map((row) => row.key);
  const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'kept a day' } };
  t.equal((await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'purge-old' })).status, 201);
  clock.advance(12 * 3_600_000);
  t.equal((await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'purge-new' })).status, 201);
  t.same(await stored(), ['purge-new', 'purge-old']);

  // The purge runs every IDEMPOTENCY_PURGE_INTERVAL_MS: one falls due between the old key's expiry and the new one's.
  clock.advance(12 * 3_600_000 + IDEMPOTENCY_PURGE_INTERVAL_MS);
  const left = await eventually(
    async () => {
      const keys = await stored();
      return keys.length <= 1 && keys;
    },
    { timeoutMs: 10_000, everyMs: 25, what: 'the purge' },
  );
  t.same(left, ['purge-new'], 'the expired key is gone from the database; the other is kept');
  const replay = await createGeneration(server, key, user.workspaceId, body, { 'idempotency-key': 'purge-new' });
  t.equal(replay.headers.get('idempotent-replayed'), 'true', 'the kept key still replays');
  const reused = await createGeneration(server, key, user.workspaceId, { ...body, params: { prompt: 'another body' } }, { 'idempotency-key': 'purge-old' });
  t.equal(reused.status, 201, 'the purged key, sent again with another body, is a new request');
  t.equal(reused.headers.get('idempotent-replayed'), null);

  // A backlog goes a page at a time (here pages of 2): every expired key, none of the others.
  const now = clock.now();
  await query(
    `insert into idempotency_keys (workspace_id, key, request_hash, response_status, response_body, created_at, expires_at)
     select ?, 'backlog-' || n, 'h', 201, '{}', ?, ? from generate_series(1, 5) as n`,
    [user.workspaceId, new Date(now - 2 * 86_400_000), new Date(now - 86_400_000)],
  );
  t.equal(await purgeExpiredIdempotencyKeys(server.services.db, now, undefined, 2), 5, 'five purged in three pages');
  t.same(await stored(), ['purge-new', 'purge-old'], 'the keys still in their day are left');
});

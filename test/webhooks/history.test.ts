import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { DELETED_ENDPOINT_TTL_MS, DELIVERIES_KEPT, RETENTION_INTERVAL_MS } from '../../actors/webhook/retention.ts';
import { startTestServer } from '../helpers/server.ts';
import { withKey } from '../helpers/identity.ts';
import { cancelGeneration, createEndpoint, createGeneration, deliveries, eventually, startReceiver, tenant } from './support.ts';

t.test('history: the 100 most recent deliveries with their attempts; the retention job prunes older finished ones, never pending ones', async (t) => {
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, {
    clock,
    env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000', WEBHOOK_TIMEOUT_MS: '60000', RATE_LIMIT_FREE: '100000' },
  });
  const who = await tenant(server);
  const receiver = await startReceiver(t);
  const stuck = await startReceiver(t);
  stuck.behave(() => ({ hold: true }));
  const endpoint = await createEndpoint(server, who, receiver.url, ['generation.cancelled']);
  const blocked = await createEndpoint(server, who, stuck.url, ['generation.cancelled']);
  const total = DELIVERIES_KEPT + 5;
  for (let i = 0; i < total; i++) {
    const created = await createGeneration(server, who, `job ${i}`);
    await cancelGeneration(server, who, created.id);
  }
  const count = async (endpointId: string, status?: string) => {
    const [row] = await server.services.db
      .em()
      .execute<Array<{ n: number }>>(
        `select count(*)::int as n from webhook_deliveries where endpoint_id = ?${status ? ' and status = ?' : ''}`,
        status ? [endpointId, status] : [endpointId],
      );
    return row!.n;
  };
  await eventually(async () => ((await count(endpoint.id, 'delivered')) === total ? true : undefined), 'all delivered');
  await receiver.waitFor(total);

  const page = await deliveries(server, who, endpoint.id);
  t.equal(page.data.length, DELIVERIES_KEPT, '100 by default');
  t.ok(page.nextCursor, 'and a cursor to the older ones, not pruned yet');
  t.same(
    page.data.map((d) => d.id),
    [...page.data.map((d) => d.id)].sort().reverse(),
    'newest first',
  );
  t.ok(page.data.every((d) => d.status === 'delivered' && d.attempts.length === 1 && d.attempts[0].responseStatus === 200));
  const older = await deliveries(server, who, endpoint.id, `&cursor=${page.nextCursor}`);
  t.equal(older.data.length, 5);
  t.equal(older.nextCursor, null);
  t.equal((await deliveries(server, who, endpoint.id, '&limit=10&status=delivered')).data.length, 10);
  t.equal((await server.json(`/v1/webhooks/${endpoint.id}/deliveries?workspaceId=${who.workspaceId}&limit=101`, { headers: withKey(who.key) })).status, 400);
  t.equal(await count(blocked.id, 'pending'), total, 'the other endpoint has all its deliveries pending behind a held request');

  clock.advance(RETENTION_INTERVAL_MS);
  await eventually(async () => ((await count(endpoint.id)) === DELIVERIES_KEPT ? true : undefined), 'pruned to 100');
  const kept = await deliveries(server, who, endpoint.id);
  t.same(
    kept.data.map((d) => d.id),
    page.data.map((d) => d.id),
    'the 100 most recent are kept',
  );
  t.equal(kept.nextCursor, null);
  t.equal(await count(blocked.id), total, 'pending deliveries are never pruned');

  // A deleted endpoint goes, with its history, a week after its deletion.
  const deleted = await server.json(`/v1/webhooks/${endpoint.id}?workspaceId=${who.workspaceId}`, { method: 'DELETE', headers: withKey(who.key) });
  t.equal(deleted.status, 200);
  clock.advance(DELETED_ENDPOINT_TTL_MS + RETENTION_INTERVAL_MS);
  await eventually(async () => ((await count(endpoint.id)) === 0 ? true : undefined), 'purged');
  t.same(await server.services.db.em().execute('select id from webhook_endpoints where id = ?', [endpoint.id]), []);
  t.equal(await count(blocked.id), total, 'the other endpoint keeps its pending deliveries');
});

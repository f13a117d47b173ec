import t from 'tap';
import { SIGNATURE_HEADER, verifyWebhook } from '../../client/src/webhooks.ts';
import { signUp, withCookie } from '../helpers/identity.ts';
import { startReceiver } from '../webhooks/support.ts';
import { clusterDatabase, clusterEnv, eventually, NEEDS_POSTGRES_REDIS, startCluster } from './support.ts';

const SHARDS = 8;

/**
 * Budget alerts on a cluster of two nodes: jobs sent through both, and the thresholds checked through both
 * at once, still make one budget.threshold_crossed event per threshold (the crossing row's primary key
 * decides, in PostgreSQL), each delivered signed.
 */
t.test('two nodes, jobs and checks through both: one event per threshold crossed', { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const db = await clusterDatabase(t);
  const receiver = await startReceiver(t);
  const { nodes } = await startCluster(t, db, ['a', 'b'], clusterEnv(db.url, SHARDS, { LOCAL_PROVIDER_LATENCY_MS: '20' }), SHARDS);
  const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
  const owner = await signUp(a.client);
  const ws = owner.workspaceId;
  const send = (via: typeof a, path: string, method: string, body: unknown) =>
    via.client.json(path, { method, headers: withCookie(owner.cookie), body: JSON.stringify(body) });

  const endpoint = await send(b, '/v1/webhooks', 'POST', { workspaceId: ws, url: receiver.url, eventTypes: ['budget.threshold_crossed'] });
  t.equal(endpoint.status, 201, JSON.stringify(endpoint.body));
  const settings = { workspaceId: ws, creditsUsedPercents: [20, 40, 60] };
  const set = await send(b, '/v1/budgets', 'PATCH', settings);
  t.equal(set.status, 200, JSON.stringify(set.body));

  // Sixteen images of 4 credits (64 of the free plan's 100), half through each node, all at once.
  const created = await Promise.all(
    Array.from({ length: 16 }, (_, i) =>
      send(i % 2 ? a : b, '/v1/generations', 'POST', {
        workspaceId: ws,
        mode: 'text_to_image',
        model: 'local/image-fast',
        params: { prompt: `p${i}`, numImages: 1 },
      }),
    ),
  );
  t.same(
    created.map((c) => c.status),
    Array(16).fill(201),
    'all created',
  );
  await eventually(
    'every job ended',
    async () => {
      const [row] = await db
        .em()
        .execute<Array<{ n: number }>>(`select count(*)::int as n from generations where workspace_id = ? and status in ('succeeded', 'failed')`, [ws]);
      return row?.n === 16 ? true : undefined;
    },
    60_000,
  );
  // Both nodes check the workspace at the same moment, several times: the crossings are already claimed.
  for (let round = 0; round < 3; round++) {
    const checks = await Promise.all([send(a, '/v1/budgets', 'PATCH', settings), send(b, '/v1/budgets', 'PATCH', settings)]);
    t.same(
      checks.map((c) => c.status),
      [200, 200],
      `round ${round}: both nodes checked`,
    );
  }

  const received = await receiver.waitFor(3, 60_000);
  const events = received.map((r) => verifyWebhook(r.rawBody, String(r.headers[SIGNATURE_HEADER]), endpoint.body.secret) as unknown as Record<string, any>);
  t.same(
    events.map((e) => [e.event, e.data.threshold]).sort((x, y) => x[1] - y[1]),
    [
      ['budget.threshold_crossed', 20],
      ['budget.threshold_crossed', 40],
      ['budget.threshold_crossed', 60],
    ],
  );
  const [counts] = await db.em().execute<Array<{ events: number; crossings: number; deliveries: number }>>(
    `select (select count(*)::int from webhook_events where workspace_id = ? and event_type = 'budget.threshold_crossed') as events,
            (select count(*)::int from budget_crossings where workspace_id = ?) as crossings,
            (select count(*)::int from webhook_deliveries where workspace_id = ? and event_type = 'budget.threshold_crossed') as deliveries`,
    [ws, ws, ws],
  );
  t.same(counts, { events: 3, crossings: 3, deliveries: 3 }, 'one event, one crossing and one delivery per threshold');
  const banner = await a.client.json(`/v1/budgets?workspaceId=${ws}`, { headers: withCookie(owner.cookie) });
  t.equal(banner.body.alerts.filter((x: { current: boolean }) => x.current).length, 3, 'the banner shows the three through either node');
});

import t from 'tap';
import { DELIVERY_HEADER, SIGNATURE_HEADER, verifyWebhook } from '../../client/src/webhooks.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { startReceiver } from '../webhooks/support.ts';
import { clusterDatabase, clusterEnv, eventually, NEEDS_POSTGRES_REDIS, startCluster, type NodeProcess } from './support.ts';

const SHARDS = 16;
const WORKSPACES = 3;
const PER_WORKSPACE = 10;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);

t.test(
  'N generations on three nodes: exactly N deliveries, each verified, in order per endpoint; each generation listed and read through every node',
  { skip: NEEDS_POSTGRES_REDIS },
  async (t) => {
    const db = await clusterDatabase(t);
    const receiver = await startReceiver(t);
    const { nodes } = await startCluster(
      t,
      db,
      ['a', 'b', 'c'],
      clusterEnv(db.url, SHARDS, {
        // Leases long enough that a loaded machine never loses one by a late renewal: no shard moves here, so
        // no delivery may be posted twice.
        LOCAL_PROVIDER_LATENCY_MS: '50',
        CLUSTER_HEARTBEAT_MS: '500',
        CLUSTER_DEAD_AFTER_MS: '6000',
        CLUSTER_LEASE_MS: '6000',
      }),
      SHARDS,
    );

    // One workspace signed up through each node, each with its own endpoint (created through the next node).
    const tenants = await Promise.all(
      nodes.map(async (node, i) => {
        const user = await signUp(node.client);
        const { key } = await createKey(node.client, user.cookie, user.workspaceId, ['all']);
        const endpoint = await nodes[(i + 1) % 3]!.client.json('/v1/webhooks', {
          method: 'POST',
          headers: withKey(key),
          body: JSON.stringify({
            workspaceId: user.workspaceId,
            url: receiver.url,
            eventTypes: ['generation.completed', 'generation.failed', 'generation.cancelled', 'generation.expired'],
          }),
        });
        if (endpoint.status !== 201) throw new Error(`endpoint: ${endpoint.status} ${JSON.stringify(endpoint.body)}`);
        return { workspaceId: user.workspaceId, key, endpointId: endpoint.body.id as string, secret: endpoint.body.secret as string };
      }),
    );

    // Creates round robin over the three nodes (a 503 while a shard settles is retried, as a client does).
    const created: Array<{ id: string; tenant: (typeof tenants)[number]; via: NodeProcess }> = [];
    let retried = 0;
    for (let i = 0; i < WORKSPACES * PER_WORKSPACE; i++) {
      const tenant = tenants[i % WORKSPACES]!;
      const via = nodes[Math.floor(i / WORKSPACES) % 3]!;
      for (;;) {
        const r = await via.client.json('/v1/generations', {
          method: 'POST',
          headers: withKey(tenant.key),
          body: JSON.stringify({ workspaceId: tenant.workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${i}` } }),
        });
        if (r.status === 201) {
          created.push({ id: r.body.id, tenant, via });
          break;
        }
        if (r.status !== 503) throw new Error(`create: ${r.status} ${JSON.stringify(r.body)}`);
        retried++;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    const n = created.length;
    t.equal(n, WORKSPACES * PER_WORKSPACE, `${n} generations created round robin (${retried} creates retried after a 503)`);

    // Each generation is read through every node and listed through the two others than the one that created it.
    const lists = new Map<string, Map<string, Set<string>>>();
    for (const tenant of tenants) {
      const byNode = new Map<string, Set<string>>();
      for (const node of nodes) {
        const list = await node.client.json(`/v1/generations?workspaceId=${tenant.workspaceId}&limit=100`, { headers: withKey(tenant.key) });
        byNode.set(node.id, new Set(list.body.data.map((g: { id: string }) => g.id)));
      }
      lists.set(tenant.workspaceId, byNode);
    }
    let listed = 0;
    let read = 0;
    for (const { id, tenant, via } of created) {
      for (const node of nodes) {
        if (node !== via && lists.get(tenant.workspaceId)!.get(node.id)!.has(id)) listed++;
        const g = await node.client.json(`/v1/generations/${id}?workspaceId=${tenant.workspaceId}`, { headers: withKey(tenant.key) });
        if (g.status === 200 && g.body.id === id) read++;
      }
    }
    t.equal(listed, n * 2, 'every generation is listed through both nodes other than the one it was created on');
    t.equal(read, n * 3, 'every generation is read through each of the three nodes');

    await eventually(
      'every generation terminal',
      async () => {
        const rows = await db.em().execute<Array<{ status: string }>>('select status from generations');
        return rows.length === n && rows.every((r) => TERMINAL.has(r.status)) ? true : undefined;
      },
      60_000,
      100,
    );
    await receiver.waitFor(n, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 1000)); // a duplicate, if any, would arrive meanwhile
    t.equal(receiver.received.length, n, `exactly ${n} deliveries posted for ${n} generations (received ${receiver.received.length})`);

    // Each verified with the endpoint's secret, one per generation.
    const secrets = new Map(tenants.map((tenant) => [tenant.workspaceId, tenant.secret]));
    const events = receiver.received.map((r) => {
      const secret = secrets.get(r.body?.data?.workspaceId)!;
      return verifyWebhook(r.rawBody, String(r.headers[SIGNATURE_HEADER]), secret);
    });
    t.equal(events.length, n, 'every delivery verifies with its endpoint secret');
    t.same(new Set(events.map((e) => e.data.generationId)), new Set(created.map((c) => c.id)), 'one delivery for each generation');
    t.ok(
      receiver.received.every((r, i) => r.headers[DELIVERY_HEADER] === events[i]!.id),
      'the delivery header names the signed event',
    );

    // In order per endpoint: the order in which the deliveries were recorded (their ids sort by creation).
    for (const tenant of tenants) {
      const posted = events.filter((e) => e.data.workspaceId === tenant.workspaceId).map((e) => e.id);
      const rows = await db
        .em()
        .execute<Array<{ id: string; status: string }>>('select id, status from webhook_deliveries where endpoint_id = ? order by id', [tenant.endpointId]);
      t.same(
        posted,
        rows.map((r) => r.id),
        `endpoint ${tenant.endpointId}: ${posted.length} deliveries posted in the order they were recorded`,
      );
      t.ok(
        rows.every((r) => r.status === 'delivered'),
        'and each is recorded delivered',
      );
      const times = events.filter((e) => e.data.workspaceId === tenant.workspaceId).map((e) => Date.parse(e.createdAt));
      t.ok(
        times.every((at, i) => i === 0 || at >= times[i - 1]!),
        'their events were posted in the order they were emitted',
      );
    }
  },
);

import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createClient } from 'redis';
import type { Test } from 'tap';
import { listLeases } from '../../persistence/cluster/index.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { ClusterRouting } from '../../runtime/cluster/routing.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { startReceiver } from '../webhooks/support.ts';
import { clusterDatabase, eventually, startClusterNode, type NodeProcess } from './support.ts';

const NEEDS =
  process.env.TEST_DATABASE_URL && process.env.TEST_REDIS_URL ? false : 'cluster mode needs PostgreSQL and Redis: set TEST_DATABASE_URL and TEST_REDIS_URL';
const SHARDS = 16;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);

type Node = NodeProcess;

type Timeline = Array<{ status: string; at: string }>;

/** The most generations open at once, each from the entry `opened` picks in its timeline until its terminal one. */
function peakOpen(timelines: Timeline[], opened: (timeline: Timeline) => Timeline[number] | undefined): number {
  const edges: Array<[number, number]> = [];
  for (const timeline of timelines) {
    const began = opened(timeline);
    const ended = timeline.find((e) => TERMINAL.has(e.status));
    if (began && ended) edges.push([Date.parse(began.at), 1], [Date.parse(ended.at), -1]);
  }
  edges.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let open = 0;
  let peak = 0;
  for (const [, step] of edges) peak = Math.max(peak, (open += step));
  return peak;
}

/** The most generations running at once (running until terminal). */
const peakRunning = (timelines: Timeline[]) => peakOpen(timelines, (timeline) => timeline.find((e) => e.status === 'running'));
/** The most generations unfinished at once (from their first entry, when accepted, until terminal). */
const peakUnfinished = (timelines: Timeline[]) => peakOpen(timelines, (timeline) => timeline[0]);

async function startCluster(t: Test, ids: string[], env: Record<string, string>): Promise<Node[]> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-cluster-'));
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  return Promise.all(ids.map((id) => startClusterNode(t, id, env, dataDir)));
}

t.test('three nodes behave like one: forwarding, cluster-wide limits, exactly-once webhooks, kill -9 under load', { skip: NEEDS }, async (t) => {
  const db = await clusterDatabase(t);
  const receiver = await startReceiver(t);
  const env = {
    DATABASE_URL: db.url,
    REDIS_URL: process.env.TEST_REDIS_URL!,
    REDIS_KEY_PREFIX: `gs-cluster-${process.pid}-${Date.now()}:`,
    CLUSTER_SECRET: 'cluster-test-secret-0123456789abcdef',
    CLUSTER_SHARDS: String(SHARDS),
    WEBHOOK_SECRET_KEY: 'webhook-key-shared-by-all-nodes-0123456789',
    BILLING_SIGNING_SECRET: 'billing-secret-shared-by-all-nodes-01234',
    BLOB_SIGNING_SECRET: 'blob-secret-shared-by-all-nodes-0123456789',
    CLUSTER_HEARTBEAT_MS: '250',
    CLUSTER_DEAD_AFTER_MS: '1500',
    CLUSTER_LEASE_MS: '1500',
    LOCAL_PROVIDER_LATENCY_MS: '400',
    LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '3',
    ALLOW_PRIVATE_EGRESS: 'true',
    LOG_LEVEL: 'warn',
    SHUTDOWN_TIMEOUT_MS: '5000',
  };
  const nodes = await startCluster(t, ['a', 'b', 'c'], env);
  await Promise.all(
    nodes.map((node) => eventually(`${node.id} ready`, async () => ((await fetch(`${node.url}/health/ready`)).status === 200 ? true : undefined), 30_000)),
  );
  const spread = await eventually(
    '16 shards over three nodes',
    async () => {
      const counts: Record<string, number> = {};
      for (const row of await listLeases(db.em())) if (row.valid) counts[row.ownerNodeId!] = (counts[row.ownerNodeId!] ?? 0) + 1;
      return Object.values(counts).sort().join() === '5,5,6' ? counts : undefined;
    },
    30_000,
  );
  t.comment(`shards: ${JSON.stringify(spread)}`);

  const [a, b, c] = nodes as [Node, Node, Node];
  const user = await signUp(a.client);
  const { key } = await createKey(a.client, user.cookie, user.workspaceId, ['all']);
  const ws = user.workspaceId;
  const endpoint = await b.client.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({
      workspaceId: ws,
      url: receiver.url,
      eventTypes: ['generation.completed', 'generation.failed', 'generation.cancelled', 'generation.expired'],
    }),
  });
  t.equal(endpoint.status, 201, 'webhook endpoint created');
  const createOnce = (node: Node, prompt: string) =>
    node.client.json('/v1/generations', {
      method: 'POST',
      headers: withKey(key),
      body: JSON.stringify({ workspaceId: ws, mode: 'text_to_text', model: 'local/text-mini', params: { prompt } }),
    });
  // As a client should: a 503 (the workspace moving between nodes, as after a rebalance) is retried after Retry-After.
  let retried = 0;
  const retrying = async (send: () => Promise<{ status: number; body: any; headers: Headers }>) => {
    for (let attempt = 0; ; attempt++) {
      const response = await send();
      if (response.status !== 503 || attempt === 20) return response;
      retried++;
      await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? '1') * 1000));
    }
  };
  const create = (node: Node, prompt: string) => retrying(() => createOnce(node, prompt));
  const read = (node: Node, id: string) => node.client.json(`/v1/generations/${id}?workspaceId=${ws}`, { headers: withKey(key) });

  // Round robin: created on one node, read and cancelled through the others.
  const first = await create(a, 'one');
  t.equal(first.status, 201, 'created through a');
  t.equal((await read(b, first.body.id)).body.id, first.body.id, 'read through b');
  t.comment(`creates retried after a 503 before the burst: ${retried}`);
  const cancelled = await retrying(() => c.client.json(`/v1/generations/${first.body.id}/cancel?workspaceId=${ws}`, { method: 'POST', headers: withKey(key) }));
  t.ok(cancelled.status === 200 || cancelled.status === 409, `cancel through c answers 200 or 409 (${cancelled.status})`);
  if (cancelled.status === 200) t.equal(cancelled.body.status, 'cancelled');

  // A request another node forwarded is never forwarded again: signed with the cluster secret and sent to a
  // node that does not run the workspace, it is refused with 503; a forged signature is ignored and the request routed.
  const wsOwner = (await listLeases(db.em())).find((row) => row.shard === shardOf(ws, SHARDS) && row.valid)!.ownerNodeId!;
  const other = nodes.find((node) => node.id !== wsOwner)!;
  const signer = new ClusterRouting(undefined as never, { nodeId: 'x' } as never, undefined as never, env.CLUSTER_SECRET);
  const body = JSON.stringify({ workspaceId: ws, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'signed' } });
  const twice = await other.client.json('/v1/generations', {
    method: 'POST',
    headers: withKey(key, { 'x-cluster-forwarded': signer.sign('POST', '/v1/generations', body) }),
    body,
  });
  t.equal(twice.status, 503, `a signed forwarded request reaching ${other.id}, which does not run the workspace, is refused`);
  t.equal(twice.body.error.code, 'service_unavailable');
  t.equal(twice.headers.get('retry-after'), '1');
  const forged = await retrying(() =>
    other.client.json('/v1/generations', { method: 'POST', headers: withKey(key, { 'x-cluster-forwarded': `${Date.now()}.x.${'0'.repeat(64)}` }), body }),
  );
  t.equal(forged.status, 201, 'a forged signature is ignored: the request is forwarded to the owner and served');
  // The signature covers the body: one made for another body does not make this request a forwarded one.
  const altered = body.replace('signed', 'altered');
  const moved = await retrying(() =>
    other.client.json('/v1/generations', {
      method: 'POST',
      headers: withKey(key, { 'x-cluster-forwarded': signer.sign('POST', '/v1/generations', body) }),
      body: altered,
    }),
  );
  t.equal(moved.status, 201, 'a signature over another body is ignored: the request is forwarded to the owner and served');

  // The unfinished-job cap of the free plan (2 running × 10) holds across nodes: 30 creates at once, round robin.
  const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => create(nodes[i % 3]!, `burst ${i}`)));
  const accepted = burst.filter((r) => r.status === 201).map((r) => r.body.id as string);
  const refused = burst.filter((r) => r.status === 422 && r.body.error.code === 'plan_limit_reached').length;
  t.comment(
    `burst of 30 over three nodes: ${accepted.length} accepted, ${refused} refused with plan_limit_reached, statuses ${JSON.stringify(burst.map((r) => r.status))}`,
  );
  // Jobs finish during the burst (the provider answers in 400 ms), freeing room under the cap: the cap is
  // checked on the stored timelines below, as the most jobs unfinished at once, not on the count accepted.
  t.ok(refused > 0, 'the cap refused some of the burst');
  t.equal(accepted.length + refused, 30, 'every create is accepted or refused by the cap (none lost to forwarding)');

  const list = await c.client.json(`/v1/generations?workspaceId=${ws}&limit=100`, { headers: withKey(key) });
  t.ok(
    accepted.every((id) => list.body.data.some((g: { id: string }) => g.id === id)),
    'every accepted generation is listed through c',
  );

  // The local provider's limit (3 jobs) holds across the cluster: workspaces run by different nodes, 3 jobs each at once.
  const others: Array<{ workspaceId: string; key: string }> = [];
  const ownersSeen = new Set<string>();
  for (let i = 0; i < 6 && ownersSeen.size < 3; i++) {
    const other = await signUp(nodes[i % 3]!.client);
    const otherKey = (await createKey(nodes[i % 3]!.client, other.cookie, other.workspaceId, ['all'])).key;
    ownersSeen.add((await listLeases(db.em())).find((row) => row.shard === shardOf(other.workspaceId, SHARDS) && row.valid)!.ownerNodeId!);
    others.push({ workspaceId: other.workspaceId, key: otherKey });
  }
  const spreadJobs = await Promise.all(
    others.flatMap((o, i) =>
      [0, 1, 2].map((j) =>
        retrying(() =>
          nodes[(i + j) % 3]!.client.json('/v1/generations', {
            method: 'POST',
            headers: withKey(o.key),
            body: JSON.stringify({ workspaceId: o.workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `spread ${j}` } }),
          }),
        ),
      ),
    ),
  );
  t.ok(
    spreadJobs.every((r) => r.status === 201),
    `${spreadJobs.length} jobs of ${others.length} workspaces run by ${ownersSeen.size} nodes accepted`,
  );
  const spreadRows = await eventually(
    'the spread jobs finished',
    async () => {
      const rows = await db
        .em()
        .execute<Array<{ status: string; timeline: Array<{ status: string; at: string }> }>>(
          'select status, timeline from generations where workspace_id in (select jsonb_array_elements_text(?::jsonb))',
          [JSON.stringify(others.map((o) => o.workspaceId))],
        );
      return rows.length === spreadJobs.length && rows.every((r) => TERMINAL.has(r.status)) ? rows : undefined;
    },
    60_000,
    200,
  );
  const providerPeak = peakRunning(spreadRows.map((row) => row.timeline));
  t.ok(
    providerPeak <= 3,
    `at most 3 jobs ran at once at the local provider across the nodes (peak ${providerPeak}; ${others.length} workspaces could run ${others.length * 2} by their plans)`,
  );
  t.ok(
    spreadRows.every((r) => r.status === 'succeeded'),
    'and every one succeeded',
  );
  const redis = createClient({ url: process.env.TEST_REDIS_URL });
  await redis.connect();
  t.teardown(() =>
    redis.quit().then(
      () => undefined,
      () => undefined,
    ),
  );
  const slotsKey = `${env.REDIS_KEY_PREFIX}provider-slots:local`;
  const leftover = await eventually(
    'every provider slot given back',
    async () => {
      const members = await redis.sMembers(slotsKey);
      return members.length === 0 ? members : undefined;
    },
    10_000,
    100,
  ).catch(async () => redis.sMembers(slotsKey));
  t.same(leftover, [], 'no provider slot is left held once every job has ended');
  const first3 = spreadRows
    .map((r) => r.timeline.find((e) => e.status === 'running')?.at)
    .filter(Boolean)
    .sort();
  t.comment(`spread phase: ${spreadRows.length} jobs from ${first3[0]} to ${first3.at(-1)}`);

  // kill -9 of the node that runs the workspace while creates go round robin through all three.
  await eventually(
    'the burst finished',
    async () => {
      const [row] = await db
        .em()
        .execute<Array<{ open: string }>>(
          `select count(*)::int8 as open from generations where workspace_id = ? and status not in ('succeeded', 'failed', 'cancelled', 'expired')`,
          [ws],
        );
      return Number(row!.open) === 0 ? true : undefined;
    },
    60_000,
    200,
  );
  const burstTimelines = await db
    .em()
    .execute<Array<{ timeline: Array<{ status: string; at: string }> }>>('select timeline from generations where workspace_id = ?', [ws]);
  const unfinishedPeak = peakUnfinished(burstTimelines.map((row) => row.timeline));
  t.ok(unfinishedPeak <= 20, `never more than the cap of 20 unfinished jobs at once across the nodes (peak ${unfinishedPeak})`);

  const shard = shardOf(ws, SHARDS);
  const ownerId = (await listLeases(db.em())).find((row) => row.shard === shard && row.valid)!.ownerNodeId!;
  const owner = nodes.find((node) => node.id === ownerId)!;
  const underLoad: Array<Promise<{ status: number; body: any }>> = [];
  for (let i = 0; i < 15; i++) {
    underLoad.push(createOnce(nodes[i % 3]!, `load ${i}`).catch(() => ({ status: 0, body: undefined })));
    if (i === 5) owner.child.proc.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const loadAnswers = await Promise.all(underLoad);
  const acknowledged = [first.body.id as string, ...accepted, ...loadAnswers.filter((r) => r.status === 201).map((r) => r.body.id as string)];
  t.comment(
    `kill -9 of ${ownerId}, the workspace's node; answers to the 15 creates (0: connection refused): ${JSON.stringify(loadAnswers.map((r) => r.status))}`,
  );
  t.ok(
    loadAnswers.every((r) => [0, 201, 503].includes(r.status)),
    'each create under failover is acknowledged, refused as unavailable, or not answered',
  );

  // A create whose answer the kill cut off (0) may still have been written on the dead node: such a job is not
  // acknowledged, but it is the workspace's, and its new node must run it too. It may be queued behind the
  // acknowledged ones (the plan runs two at once), so every job of the workspace is waited for, not only those.
  const finished = await eventually(
    'every job of the workspace terminal',
    async () => {
      const rows = await db.em().execute<Array<{ id: string; status: string }>>('select id, status from generations where workspace_id = ?', [ws]);
      return rows.every((r) => TERMINAL.has(r.status)) ? rows : undefined;
    },
    60_000,
    200,
  ).catch(async (error) => {
    const rows = await db.em().execute<Array<{ id: string; status: string }>>('select id, status from generations where workspace_id = ?', [ws]);
    t.comment(`not terminal: ${JSON.stringify(rows.filter((r) => !TERMINAL.has(r.status)))}`);
    throw error;
  });
  t.ok(
    acknowledged.every((id) => finished.some((r) => r.id === id)),
    'every acknowledged job is there',
  );
  t.ok(
    finished.every((r) => TERMINAL.has(r.status)),
    'every job of the workspace is terminal (none stuck on the dead node)',
  );

  const survivor = nodes.find((node) => node !== owner)!;
  const after = await eventually(
    'a create accepted once the shard moved',
    async () => {
      const r = await create(survivor, 'after failover');
      return r.status === 201 ? r : undefined;
    },
    30_000,
    200,
  );
  await eventually(
    'the create after failover finished',
    async () => (TERMINAL.has((await read(survivor, after.body.id)).body.status) ? true : undefined),
    30_000,
    200,
  );
  finished.push({ id: after.body.id, status: 'succeeded' });

  // Money: nothing left reserved, the account equals its ledger.
  const [account] = await db
    .em()
    .execute<Array<{ available_credits: string; reserved_credits: string }>>(
      'select available_credits, reserved_credits from workspace_accounts where workspace_id = ?',
      [ws],
    );
  const [ledger] = await db
    .em()
    .execute<Array<{ credits: string; reserved: string }>>(
      'select coalesce(sum(credits), 0)::int8 as credits, coalesce(sum(reserved_credits), 0)::int8 as reserved from credit_ledger where workspace_id = ?',
      [ws],
    );
  t.same({ reserved: Number(account!.reserved_credits), ledgerReserved: Number(ledger!.reserved) }, { reserved: 0, ledgerReserved: 0 }, 'nothing reserved');
  t.equal(Number(account!.available_credits), Number(ledger!.credits), 'the balance equals its ledger');

  // Plan concurrency (2 running) held across the cluster: never more than 2 of the workspace's jobs running at once.
  const timelines = await db
    .em()
    .execute<Array<{ timeline: Array<{ status: string; at: string }> }>>('select timeline from generations where workspace_id = ?', [ws]);
  const peak = peakRunning(timelines.map((row) => row.timeline));
  t.ok(peak <= 2, `at most 2 of the workspace's jobs ran at once (peak ${peak})`);

  // Exactly one delivery per terminal generation, whichever node ran it (and c's in-flight ones resent by their new owner at least once).
  const terminal = finished.length;
  await receiver.waitFor(terminal, 30_000).catch(async (error: unknown) => {
    const rows = await db
      .em()
      .execute(
        "select d.status, d.attempt_count, d.next_attempt_at, d.failure_reason, d.created_at, g.status as gen, g.timeline from webhook_deliveries d left join generations g on g.id = (d.body::jsonb -> 'data' ->> 'id') where d.workspace_id = ? order by d.created_at",
        [ws],
      )
      .catch((e: Error) => [e.message]);
    t.comment(JSON.stringify(rows, null, 1));
    for (const node of nodes) t.comment(`${node.id} stderr: ${node.child.stderr().slice(-3000)}`);
    throw error;
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const sent = new Map<string, number>();
  for (const r of receiver.received) sent.set(String(r.headers['x-service-delivery']), (sent.get(String(r.headers['x-service-delivery'])) ?? 0) + 1);
  const loadIds = new Set(loadAnswers.filter((r) => r.status === 201).map((r) => r.body.id as string));
  const resent = receiver.received.filter((r) => sent.get(String(r.headers['x-service-delivery']))! > 1);
  if (resent.length > 0)
    t.comment(
      `sent more than once: ${[...new Set(resent.map((r) => `${r.headers['x-service-delivery']} (generation ${r.body?.data?.generationId}, ${loadIds.has(r.body?.data?.generationId) ? 'acknowledged just before the kill' : 'not of the kill phase'})`))].join(', ')}`,
    );
  const deliveryIds = new Set(sent.keys());
  t.comment(
    `${terminal} terminal generations, ${receiver.received.length} requests received, ${deliveryIds.size} distinct deliveries (a delivery on the wire at the kill is sent again: at least once)`,
  );
  t.equal(deliveryIds.size, terminal, 'one delivery per terminal generation');

  // Graceful stop (SIGTERM) of the node now running the workspace: it drains and hands its shards over; the
  // last node serves the workspace.
  const nowOwnerId = (await listLeases(db.em())).find((row) => row.shard === shard && row.valid)!.ownerNodeId;
  const nowOwner = nodes.find((node) => node.id === nowOwnerId)!;
  const last = nodes.find((node) => node !== owner && node !== nowOwner)!;
  const stoppedAt = Date.now();
  nowOwner.child.proc.kill('SIGTERM');
  t.equal((await nowOwner.child.exited).code, 0, `${nowOwner.id} stopped gracefully`);
  t.comment(`graceful stop of ${nowOwner.id}: ${Date.now() - stoppedAt} ms`);
  const leases = await eventually(
    `${last.id} holds every shard`,
    async () => {
      const rows = (await listLeases(db.em())).filter((row) => row.valid);
      return rows.length === SHARDS && rows.every((row) => row.ownerNodeId === last.id) ? rows : undefined;
    },
    30_000,
    100,
  );
  t.equal(leases.length, SHARDS);
  const end = await create(last, 'after the graceful stop');
  t.equal(end.status, 201, `${last.id} serves the workspace`);
  const ended = await eventually(
    'the last job finished',
    async () => {
      const g = (await read(last, end.body.id)).body;
      return TERMINAL.has(g.status) ? g : undefined;
    },
    30_000,
    200,
  );
  t.equal(ended.status, 'succeeded');
});

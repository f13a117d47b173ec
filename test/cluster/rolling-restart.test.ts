import { randomUUID } from 'node:crypto';
import t from 'tap';
import { DELIVERY_HEADER } from '../../client/src/webhooks.ts';
import { startReceiver } from '../webhooks/support.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import {
  clusterDatabase,
  clusterEnv,
  eventually,
  NEEDS_POSTGRES_REDIS,
  nodeReady,
  shardCounts,
  sleep,
  startCluster,
  startClusterNode,
  type NodeProcess,
  type Reply,
} from './support.ts';

const SHARDS = 16;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);

t.test('rolling restart of three nodes under load: no create lost, none executed twice, money balanced', { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const db = await clusterDatabase(t);
  // A drain waits for the shard's jobs in flight up to SHUTDOWN_TIMEOUT_MS; past it, a job is handed to its
  // provider again by the next owner (at least once). The bound here is far above a 300 ms job, so that a
  // slow, loaded machine never reaches it and the test checks the handover itself.
  // Leases long enough that a loaded machine never loses one by a late renewal: every shard here moves by
  // a graceful handover, which must post no delivery twice and run no job twice.
  const env = clusterEnv(db.url, SHARDS, {
    LOCAL_PROVIDER_LATENCY_MS: '300',
    SHUTDOWN_TIMEOUT_MS: '30000',
    CLUSTER_HEARTBEAT_MS: '500',
    CLUSTER_DEAD_AFTER_MS: '6000',
    CLUSTER_LEASE_MS: '6000',
  });
  const receiver = await startReceiver(t);
  // The receiver answers each delivery after 250 ms, so that stops find attempts on the wire.
  receiver.behave(() => ({ hold: true }));
  const answering = new Set<object>();
  const slowAnswers = setInterval(() => {
    for (const held of receiver.held) {
      if (answering.has(held)) continue;
      answering.add(held);
      setTimeout(() => held.release(200), 250);
    }
  }, 10);
  t.teardown(() => clearInterval(slowAnswers));
  const { nodes, dataDir } = await startCluster(t, db, ['a', 'b', 'c'], env, SHARDS);

  // Three clients, each with its own workspace (whose shards the three nodes share out), creating jobs
  // round robin through every node with an Idempotency-Key; a 503 or a refused connection is retried on
  // the next node with the same key, until it is acknowledged.
  const tenants = await Promise.all(
    nodes.map(async (node) => {
      const user = await signUp(node.client);
      const { key } = await createKey(node.client, user.cookie, user.workspaceId, ['all']);
      for (;;) {
        const endpoint = await node.client.json('/v1/webhooks', {
          method: 'POST',
          headers: withKey(key),
          body: JSON.stringify({
            workspaceId: user.workspaceId,
            url: receiver.url,
            eventTypes: ['generation.completed', 'generation.failed', 'generation.cancelled', 'generation.expired'],
          }),
        });
        if (endpoint.status === 201) break;
        if (endpoint.status !== 503) throw new Error(`endpoint: ${endpoint.status} ${JSON.stringify(endpoint.body)}`);
        await sleep(200);
      }
      return { workspaceId: user.workspaceId, key };
    }),
  );
  let stop = false;
  t.teardown(() => {
    stop = true;
  }); // a failed step ends the load too, rather than leave it running to the file's timeout
  let unavailable = 0;
  let refusedConnections = 0;
  let capRefusals = 0;
  const acknowledged = new Map<string, string>(); // Idempotency-Key -> generation id
  const unexpected: string[] = [];
  let turn = 0;
  const client = async (tenant: (typeof tenants)[number]) => {
    // At most 70 jobs of a credit each: the free plan grants 100.
    for (let job = 0; job < 70 && !stop; job++) {
      const key = randomUUID();
      const body = JSON.stringify({ workspaceId: tenant.workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${key}` } });
      for (;;) {
        const node = nodes[turn++ % nodes.length]!;
        const r: Reply | undefined = await node.client
          .json('/v1/generations', { method: 'POST', headers: withKey(tenant.key, { 'idempotency-key': key }), body })
          .catch(() => undefined);
        if (r?.status === 201) {
          const seen = acknowledged.get(key);
          if (seen !== undefined && seen !== r.body.id) unexpected.push(`key ${key} answered ${seen} then ${r.body.id}`);
          acknowledged.set(key, r.body.id);
          break;
        }
        if (r === undefined) refusedConnections++;
        else if (r.status === 503) unavailable++;
        else if (r.status === 422 && r.body.error.code === 'plan_limit_reached') {
          capRefusals++; // refused, not created: the job cap was full; a new request after a pause
          await sleep(500);
          break;
        } else {
          unexpected.push(`${node.id}: ${r.status} ${JSON.stringify(r.body)}`);
          break;
        }
        await sleep(100);
      }
      await sleep(300);
    }
  };
  const load = Promise.all(tenants.map((tenant) => client(tenant)));
  await sleep(1000);

  // Restart each node in turn: SIGTERM, wait for its exit, start it again under the same id, wait until it
  // is ready and the shards are spread over the three nodes again.
  const handovers: string[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i]!;
    const before = acknowledged.size;
    const stoppedAt = Date.now();
    node.child.proc.kill('SIGTERM');
    const exit = await node.child.exited;
    t.equal(exit.code, 0, `${node.id} stopped gracefully`);
    const exitedAt = Date.now();
    const restarted: NodeProcess = await startClusterNode(t, node.id, env, dataDir);
    nodes[i] = restarted;
    await nodeReady(restarted);
    const counts = await eventually(
      `${node.id} holds its share of the shards again`,
      async () => {
        const c = await shardCounts(db);
        return Object.keys(c).length === 3 && Object.values(c).every((n) => n === 5 || n === 6) ? c : undefined;
      },
      30_000,
      50,
    );
    handovers.push(
      `${node.id}: stop ${exitedAt - stoppedAt} ms, back with ${counts[node.id]} shards ${Date.now() - exitedAt} ms after its exit (${acknowledged.size - before} creates acknowledged meanwhile)`,
    );
  }
  await sleep(500);
  stop = true;
  await load;
  t.comment(`handovers: ${handovers.join('; ')}`);
  t.comment(
    `${acknowledged.size} creates acknowledged; retried: ${unavailable} after a 503, ${refusedConnections} after a refused connection; ${capRefusals} refused by the job cap`,
  );
  t.same(unexpected, [], 'every create was acknowledged (after retries), or refused by the job cap');
  t.ok(acknowledged.size > 0, 'the load ran');

  // Every acknowledged create exists, and only those: one generation per Idempotency-Key.
  const ids = new Set(acknowledged.values());
  t.equal(ids.size, acknowledged.size, 'each Idempotency-Key has its own generation');
  const rows = await eventually(
    'every job terminal',
    async () => {
      const r = await db.em().execute<Array<{ id: string; status: string; attempts: number }>>('select id, status, attempts from generations');
      return r.every((g) => TERMINAL.has(g.status)) ? r : undefined;
    },
    60_000,
    200,
  );
  t.same(new Set(rows.map((g) => g.id)), ids, `the ${ids.size} acknowledged generations exist, and no other (none lost, none created twice)`);
  const statuses: Record<string, number> = {};
  for (const g of rows) statuses[g.status] = (statuses[g.status] ?? 0) + 1;
  t.comment(`statuses: ${JSON.stringify(statuses)}`);
  // A graceful handover lets the shard's jobs in flight end before it hands the shard over (its queued jobs
  // wait for the next owner): none is handed to its provider a second time.
  const twice = rows.filter((g) => g.attempts > 1).map((g) => `${g.id}: ${g.attempts} attempts`);
  t.same(twice, [], 'no job was handed to its provider twice');

  // Webhooks: one delivery per job, posted once (a handover lets the attempts on the wire end and records
  // their outcomes before the next owner reads what is pending).
  await receiver.waitFor(rows.length, 60_000);
  await sleep(1000); // a second post, if any, would arrive meanwhile
  const posts = new Map<string, number>();
  for (const r of receiver.received) posts.set(String(r.headers[DELIVERY_HEADER]), (posts.get(String(r.headers[DELIVERY_HEADER])) ?? 0) + 1);
  t.equal(posts.size, rows.length, `one delivery for each of the ${rows.length} jobs`);
  t.same(
    [...posts].filter(([, n]) => n > 1),
    [],
    'no delivery was posted twice',
  );

  // Money: one reserve and one capture or release per job, nothing reserved, each balance equals its ledger.
  const ledger = await db
    .em()
    .execute<Array<{ generation_id: string; kinds: string }>>(
      `select generation_id, string_agg(kind, ',' order by kind) as kinds from credit_ledger where generation_id is not null group by generation_id`,
    );
  const settled = new Map(ledger.map((row) => [row.generation_id, row.kinds]));
  const badLedger = rows.filter((g) => !['capture,reserve', 'release,reserve'].includes(settled.get(g.id) ?? '')).map((g) => `${g.id}: ${settled.get(g.id)}`);
  t.same(badLedger, [], 'each job has one reserve and one capture or release in its ledger');
  for (const tenant of tenants) {
    const [account] = await db
      .em()
      .execute<Array<{ available_credits: string; reserved_credits: string }>>(
        'select available_credits, reserved_credits from workspace_accounts where workspace_id = ?',
        [tenant.workspaceId],
      );
    const [sum] = await db
      .em()
      .execute<Array<{ credits: string; reserved: string }>>(
        'select coalesce(sum(credits), 0)::int8 as credits, coalesce(sum(reserved_credits), 0)::int8 as reserved from credit_ledger where workspace_id = ?',
        [tenant.workspaceId],
      );
    t.same(
      { reserved: Number(account!.reserved_credits), ledgerReserved: Number(sum!.reserved), balance: Number(account!.available_credits) },
      { reserved: 0, ledgerReserved: 0, balance: Number(sum!.credits) },
      `workspace ${tenant.workspaceId}: nothing reserved, balance ${account!.available_credits} equals its ledger`,
    );
  }
});

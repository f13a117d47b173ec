import t from 'tap';
import { listLeases } from '../../persistence/cluster/index.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { clusterDatabase, clusterEnv, eventually, NEEDS_POSTGRES_REDIS, ownerOf, sleep, startCluster } from './support.ts';

const SHARDS = 8;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);

t.test('a node paused past its lease with a job in flight commits nothing for the shard once it resumes', { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const db = await clusterDatabase(t);
  const env = clusterEnv(db.url, SHARDS, {
    CLUSTER_HEARTBEAT_MS: '500',
    CLUSTER_DEAD_AFTER_MS: '2000',
    CLUSTER_LEASE_MS: '2000',
    // The job's completion falls due while its node is paused: the node tries to write it as soon as it resumes.
    LOCAL_PROVIDER_LATENCY_MS: '2500',
    LOG_LEVEL: 'info',
  });
  const { nodes } = await startCluster(t, db, ['a', 'b'], env, SHARDS);
  const user = await signUp(nodes[0]!.client);
  const { key } = await createKey(nodes[0]!.client, user.cookie, user.workspaceId, ['all']);
  const ws = user.workspaceId;
  const shard = shardOf(ws, SHARDS);
  const zombieId = (await ownerOf(db, ws, SHARDS))!;
  const zombie = nodes.find((node) => node.id === zombieId)!;
  const survivor = nodes.find((node) => node !== zombie)!;
  const epochBefore = (await listLeases(db.em())).find((row) => row.shard === shard)!.epoch;

  // A 503 while the shards settle after start-up is retried, as a client does.
  const created = await eventually(
    'the create acknowledged',
    async () => {
      const r = await survivor.client.json('/v1/generations', {
        method: 'POST',
        headers: withKey(key, { 'idempotency-key': 'in-flight' }),
        body: JSON.stringify({ workspaceId: ws, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'in flight' } }),
      });
      return r.status === 503 ? undefined : r;
    },
    10_000,
    200,
  );
  t.equal(created.status, 201, `created through ${survivor.id}, forwarded to ${zombie.id} which runs the workspace`);
  const id = created.body.id as string;
  const row = async () =>
    (
      await db
        .em()
        .execute<Array<{ status: string; attempts: number; timeline: Array<{ status: string; detail?: string }> }>>(
          'select status, attempts, timeline from generations where id = ?',
          [id],
        )
    )[0];
  await eventually('the job running at its provider', async () => ((await row())?.status === 'running' ? true : undefined), 10_000, 20);

  // Pause the owner with its job in flight, past its lease; the survivor takes the shard (a higher epoch).
  const pausedAt = Date.now();
  zombie.child.proc.kill('SIGSTOP');
  const taken = await eventually(
    `${survivor.id} takes the shard`,
    async () => {
      const lease = (await listLeases(db.em())).find((r) => r.shard === shard && r.valid);
      return lease?.ownerNodeId === survivor.id ? lease : undefined;
    },
    20_000,
    50,
  );
  const takenAfter = Date.now() - pausedAt;
  t.ok(taken.epoch > epochBefore, `the shard moved to ${survivor.id} at epoch ${taken.epoch} (was ${epochBefore}), ${takenAfter} ms after the pause`);

  // Resume the zombie: its provider's answer is due, so it tries to finish the job at once.
  zombie.child.proc.kill('SIGCONT');
  const done = await eventually(
    'the job terminal',
    async () => {
      const r = await row();
      return r && TERMINAL.has(r.status) ? r : undefined;
    },
    20_000,
    50,
  );
  await sleep(3000); // anything the zombie still meant to write would have landed by now
  const end = (await row())!;
  t.equal(end.status, 'succeeded', 'the job succeeded');
  t.same(end, done, 'nothing changed the job after it ended');
  const terminalEntries = end.timeline.filter((e) => TERMINAL.has(e.status));
  t.equal(terminalEntries.length, 1, 'the job was finished once (one terminal entry in its timeline)');
  t.comment(`timeline: ${JSON.stringify(end.timeline)}; attempts ${end.attempts}`);
  // The new owner resubmits it (attempt 2); the zombie, back as a new member, may get the shard back by
  // a handover, whose new owner resubmits it again: the zombie's first attempt never completes.
  t.ok(end.attempts >= 2, `it was resubmitted by the node that took the shard (${end.attempts} attempts)`);
  t.ok(
    end.timeline.filter((e) => e.status === 'running' && e.detail === undefined).length === 1,
    "its timeline holds one first start (the zombie's), then only resubmissions and its one end",
  );
  const ledger = await db.em().execute<Array<{ kind: string }>>('select kind from credit_ledger where generation_id = ? order by kind', [id]);
  t.same(
    ledger.map((e) => e.kind),
    ['capture', 'reserve'],
    'one reserve and one capture in its ledger',
  );
  const [account] = await db
    .em()
    .execute<Array<{ available_credits: string; reserved_credits: string }>>(
      'select available_credits, reserved_credits from workspace_accounts where workspace_id = ?',
      [ws],
    );
  const [sum] = await db
    .em()
    .execute<Array<{ credits: string }>>('select coalesce(sum(credits), 0)::int8 as credits from credit_ledger where workspace_id = ?', [ws]);
  t.same(
    { reserved: Number(account!.reserved_credits), balance: Number(account!.available_credits) },
    { reserved: 0, balance: Number(sum!.credits) },
    'nothing reserved, the balance equals its ledger',
  );

  // The zombie's own account of it: it lost the shard (lease lost or expelled) and its write, if it tried one, was fenced out.
  const logs = [...zombie.child.lines, zombie.child.stderr()].join('\n');
  const lost = [...logs.matchAll(/"reason":"([a-z-]+)"[^\n]*"msg":"shard lost"|"msg":"shard lost"[^\n]*"reason":"([a-z-]+)"/g)].map((m) => m[1] ?? m[2]);
  const fenced = (logs.match(/fenced out/g) ?? []).length;
  t.comment(`zombie ${zombie.id}: shards lost with reasons ${JSON.stringify([...new Set(lost)])}, ${fenced} log lines of a fenced-out write`);
  t.ok(
    lost.some((reason) => reason === 'lease-lost' || reason === 'expelled'),
    'the zombie noticed it lost its shards and stopped their actors',
  );

  // The cluster still serves the workspace, through either node.
  for (const node of nodes) {
    const next = await eventually(
      `a create through ${node.id}`,
      async () => {
        const r = await node.client.json('/v1/generations', {
          method: 'POST',
          headers: withKey(key),
          body: JSON.stringify({ workspaceId: ws, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `after, via ${node.id}` } }),
        });
        return r.status === 201 ? r : undefined;
      },
      20_000,
      250,
    );
    const finished = await eventually(
      'it finished',
      async () => {
        const g = await node.client.json(`/v1/generations/${next.body.id}?workspaceId=${ws}`, { headers: withKey(key) });
        return TERMINAL.has(g.body.status) ? g.body : undefined;
      },
      20_000,
      100,
    );
    t.equal(finished.status, 'succeeded', `the workspace is served through ${node.id} after the zombie resumed`);
  }
});

import t from 'tap';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { clusterDatabase, clusterEnv, eventually, ownerOf, startCluster, type NodeProcess, type Reply, NEEDS_POSTGRES_REDIS } from './support.ts';

const SHARDS = 8;

t.test('a batch sent to a node that does not run the workspace is forwarded to its owner and created there', { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const db = await clusterDatabase(t);
  const env = clusterEnv(db.url, SHARDS, { LOCAL_PROVIDER_LATENCY_MS: '0' });
  const { nodes } = await startCluster(t, db, ['a', 'b'], env, SHARDS);

  const user = await signUp(nodes[0]!.client);
  const ws = user.workspaceId;
  const { key } = await createKey(nodes[0]!.client, user.cookie, ws, ['generations.write', 'generations.read']);
  const ownerId = await ownerOf(db, ws, SHARDS);
  t.ok(ownerId, "the workspace's shard has an owner");
  const owner = nodes.find((node) => node.id === ownerId)!;
  const other = nodes.find((node) => node.id !== ownerId) as NodeProcess;
  t.comment(`workspace on ${owner.id}; batch sent to ${other.id}`);

  const items = Array.from({ length: 5 }, (_, i) => ({
    mode: 'text_to_text',
    model: 'local/text-mini',
    params: { prompt: `forwarded ${i}` },
    idempotencyKey: `fwd-${i}`,
  }));
  items.push({ mode: 'text_to_text', model: 'local/nope', params: { prompt: 'x' }, idempotencyKey: 'fwd-bad' });
  // As a client should: a 503 (the workspace moving between nodes) is sent again after Retry-After.
  const send = async (node: NodeProcess): Promise<Reply> => {
    for (let attempt = 0; ; attempt++) {
      const reply = await node.client.json('/v1/generations/batch', {
        method: 'POST',
        headers: withKey(key),
        body: JSON.stringify({ workspaceId: ws, items }),
      });
      if (reply.status !== 503 || attempt === 10) return reply;
      await new Promise((resolve) => setTimeout(resolve, Number(reply.headers.get('retry-after') ?? '1') * 1000));
    }
  };
  const first = await send(other);
  t.equal(first.status, 200, first.status === 200 ? 'the batch is answered' : JSON.stringify(first.body));
  t.match(first.body, { created: 5, replayed: 0, refused: 1 });
  t.equal(first.body.results[5].body.error.code, 'validation_error');
  t.ok(first.headers.get('x-ratelimit-limit'), "the owner's answer is relayed with its headers");

  const ids = first.body.results.slice(0, 5).map((r: any) => r.body.id);
  const rows = await db.em().execute<Array<{ id: string; status: string }>>('select id, status from generations where workspace_id = ? order by id', [ws]);
  t.same(
    rows.map((r) => r.id),
    ids,
    'the five generations, committed',
  );
  await eventually('the jobs to succeed', async () => {
    const done = await db
      .em()
      .execute<Array<{ n: string }>>(`select count(*)::int8 as n from generations where workspace_id = ? and status = 'succeeded'`, [ws]);
    return Number(done[0]!.n) === 5 ? true : undefined;
  });
  const ledger = await db
    .em()
    .execute<Array<{ kind: string; n: string }>>(
      `select kind, count(*)::int8 as n from credit_ledger where workspace_id = ? and generation_id is not null group by kind order by kind`,
      [ws],
    );
  t.same(
    ledger.map((r) => [r.kind, Number(r.n)]),
    [
      ['capture', 5],
      ['reserve', 5],
    ],
    'one reserve and one capture per job, by the owner alone',
  );

  // The same batch again, to the owner this time: the keyed items replay what the forwarded batch made.
  const again = await send(owner);
  t.equal(again.status, 200);
  t.match(again.body, { created: 0, replayed: 5, refused: 1 });
  t.same(
    again.body.results.slice(0, 5).map((r: any) => r.body.id),
    ids,
  );
});

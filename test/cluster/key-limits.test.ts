import t from 'tap';
import { signUp, withCookie, withKey } from '../helpers/identity.ts';
import { clusterDatabase, clusterEnv, ownerOf, sendRetryingMoves, startCluster, NEEDS_POSTGRES_REDIS } from './support.ts';

const SHARDS = 8;

const send = sendRetryingMoves;

t.test(
  "a key's limits hold across the nodes of a cluster: changed through any node, enforced exactly by the workspace's owner",
  { skip: NEEDS_POSTGRES_REDIS },
  async (t) => {
    const db = await clusterDatabase(t);
    const env = clusterEnv(db.url, SHARDS, { LOCAL_PROVIDER_LATENCY_MS: '0' });
    const { nodes } = await startCluster(t, db, ['a', 'b'], env, SHARDS);

    const user = await signUp(nodes[0]!.client);
    const ws = user.workspaceId;
    const created = await nodes[0]!.client.json('/v1/api-keys', {
      method: 'POST',
      headers: withCookie(user.cookie),
      body: JSON.stringify({ workspaceId: ws, name: 'limited', scopes: ['all'], limits: { creditBudget: 100 } }),
    });
    t.equal(created.status, 201);
    const { id, key } = created.body as { id: string; key: string };
    const ownerId = await ownerOf(db, ws, SHARDS);
    const other = nodes.find((node) => node.id !== ownerId)!;
    t.comment(`workspace on ${ownerId}; limits changed through ${other.id}`);

    // The free plan holds 20 unfinished jobs and 100 credits: a budget of 15 binds first.
    const patched = await send(other, `/v1/api-keys/${id}`, {
      method: 'PATCH',
      headers: withCookie(user.cookie),
      body: JSON.stringify({ limits: { creditBudget: 15, period: 'day' } }),
    });
    t.equal(patched.status, 200, JSON.stringify(patched.body));
    t.same(patched.body.limits.creditBudget, 15);

    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        send(nodes[i % 2]!, '/v1/generations', {
          method: 'POST',
          headers: withKey(key),
          body: JSON.stringify({ workspaceId: ws, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${i}` } }),
        }),
      ),
    );
    const byStatus: Record<number, number> = {};
    for (const r of replies) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    t.same(byStatus, { 201: 15, 402: 25 }, 'exactly the budget, whichever node each create reached');
    t.ok(replies.filter((r) => r.status === 402).every((r) => /daily credit budget of 15 is spent/.test(r.body.error?.message)));

    const [row] = await db.em().execute<Array<{ credits: string }>>(`select credits from api_key_spend where key_id = ? and period = 'day'`, [id]);
    t.equal(Number(row!.credits), 15, "the owner wrote the key's spend");
    const usage = await send(other, `/v1/api-keys/${id}/usage`, { headers: withCookie(user.cookie) });
    t.equal(usage.status, 200);
    t.match(usage.body.limits.creditBudget, { limit: 15, spent: 15, remaining: 0 }, "usage read through the other node shows the owner's figures");
  },
);

import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie } from '../helpers/identity.ts';
import { cancelGeneration, createGeneration, moneyOf, serverQuery, waitFor } from './flow.ts';

t.test("tenant isolation of creating and cancelling: a key or a session of workspace A can neither create in B nor cancel B's jobs", async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const a = await signUp(server);
  const b = await signUp(server);
  const { key: aKey } = await createKey(server, a.cookie, a.workspaceId, ['all']);
  const { key: bKey } = await createKey(server, b.cookie, b.workspaceId, ['generations.write', 'generations.read']);
  const { key: readOnly } = await createKey(server, a.cookie, a.workspaceId, ['generations.read']);
  const query = serverQuery(server);
  const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'x' } };

  const byKey = await createGeneration(server, aKey, b.workspaceId, body);
  t.equal(byKey.status, 403, 'a key naming another workspace');
  t.equal(byKey.body.error?.code, 'forbidden');
  const bySession = await server.json('/v1/generations', {
    method: 'POST',
    headers: withCookie(a.cookie),
    body: JSON.stringify({ workspaceId: b.workspaceId, ...body }),
  });
  t.equal(bySession.status, 404, 'a session of a non-member: like a workspace that does not exist');
  t.equal(bySession.body.error.code, 'not_found');
  const unscoped = await createGeneration(server, readOnly, a.workspaceId, body);
  t.equal(unscoped.status, 403, 'a key without generations.write');
  t.equal(unscoped.body.error?.code, 'forbidden');
  const [count] = await query<{ n: string }>('select count(*)::int8 as n from generations', []);
  t.equal(Number(count!.n), 0, 'none of them made a job');

  const mine = await createGeneration(server, bKey, b.workspaceId, body);
  t.equal(mine.status, 201);
  await waitFor(server, bKey, b.workspaceId, mine.body.id, (g) => g.status === 'submitted', 'submitted');
  t.equal((await cancelGeneration(server, aKey, a.workspaceId, mine.body.id)).status, 404, 'a key of A, its own workspace in the query');
  const noWs = await server.json(`/v1/generations/${mine.body.id}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${aKey}` } });
  t.equal(noWs.status, 403, 'a key must name its workspace');
  t.match(noWs.body.error.message, /must carry its workspace id/);
  t.equal(
    (await server.json(`/v1/generations/${mine.body.id}/cancel?workspaceId=${b.workspaceId}`, { method: 'POST', headers: withCookie(a.cookie) })).status,
    404,
    'a session of a non-member',
  );
  const still = await server.json(`/v1/generations/${mine.body.id}?workspaceId=${b.workspaceId}`, { headers: { authorization: `Bearer ${bKey}` } });
  t.equal(still.body.status, 'submitted', "B's job runs on");

  // A session of a member of B may cancel it.
  const byOwner = await server.json(`/v1/generations/${mine.body.id}/cancel?workspaceId=${b.workspaceId}`, { method: 'POST', headers: withCookie(b.cookie) });
  t.equal(byOwner.status, 200);
  t.equal(byOwner.body.status, 'cancelled');
  t.same(await moneyOf(query, b.workspaceId), { available: 100, reserved: 0, ledgerAvailable: 100, ledgerReserved: 0, reservations: [] });
  const aAccount = await query<{ n: string }>('select count(*)::int8 as n from credit_ledger where workspace_id = ? and generation_id is not null', [
    a.workspaceId,
  ]);
  t.equal(Number(aAccount[0]!.n), 0, "A's books never moved");
});

import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { setPlan } from './support.ts';
import { cancelGeneration, createGeneration, getGeneration, moneyOf, serverQuery, waitFor } from './flow.ts';

async function proWorkspace(server: TestServer) {
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'pro');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const create = async (prompt: string) => {
    const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt } });
    if (created.status !== 201) throw new Error(JSON.stringify(created.body));
    return created.body.id;
  };
  const status = async (id: string) => (await getGeneration(server, key, user.workspaceId, id)).status;
  const until = (id: string, wanted: string) => waitFor(server, key, user.workspaceId, id, (g) => g.status === wanted, wanted);
  return { user, key, create, status, until };
}

t.test('a provider that takes two jobs at a time: jobs of any workspace wait in queued while it is full, and start as its slots free', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 7, 1, 10, 0, 0));
  const server = await startTestServer(t, {
    clock,
    env: { LOCAL_PROVIDER_LATENCY_MS: '10000', LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '2', RATE_LIMIT_PRO: '100000' },
  });
  const a = await proWorkspace(server);
  const b = await proWorkspace(server);

  // The pro plan runs 10 jobs at a time; the provider's two slots are what binds.
  const a1 = await a.create('a1');
  const a2 = await a.create('a2');
  await a.until(a1, 'submitted');
  await a.until(a2, 'submitted');
  const b1 = await b.create('b1');
  const b2 = await b.create('b2');
  const a3 = await a.create('a3');
  await server.services.actors.drain();
  t.same([await b.status(b1), await b.status(b2), await a.status(a3)], ['queued', 'queued', 'queued'], 'the provider is full: every other job waits');
  t.equal(server.services.actors.isLive('ws', b.user.workspaceId), true);

  // A slot frees when a job ends (here: cancelled); the oldest waiting workspace's job takes it, with no new request.
  const cancelled = await cancelGeneration(server, a.key, a.user.workspaceId, a1);
  t.equal(cancelled.status, 200);
  const started = await Promise.race([b.until(b1, 'submitted').then(() => 'b1'), a.until(a3, 'submitted').then(() => 'a3')]);
  await server.services.actors.drain();
  const states = { b1: await b.status(b1), b2: await b.status(b2), a3: await a.status(a3) };
  t.equal(
    Object.values(states).filter((s) => s === 'submitted').length,
    1,
    `exactly one waiting job took the freed slot (${started}): ${JSON.stringify(states)}`,
  );
  t.equal(Object.values(states).filter((s) => s === 'queued').length, 2, 'the others still wait');

  // The provider's latency passes: the two jobs in flight succeed and the last two take their slots.
  clock.advance(10_000);
  await a.until(a2, 'succeeded');
  for (const [w, id] of [
    [b, b1],
    [b, b2],
    [a, a3],
  ] as const) {
    // reserved: the slot is its own and the hand-over is under way (a quick provider's submitted rides with its next write)
    if (['queued', 'reserved'].includes(await w.status(id))) await w.until(id, 'submitted');
  }
  await server.services.actors.drain();
  const inFlight = [await b.status(b1), await b.status(b2), await a.status(a3)].filter((s) => s === 'submitted' || s === 'running').length;
  t.equal(inFlight, 2, 'never more than two in flight');
  clock.advance(10_000);
  for (const [w, id] of [
    [b, b1],
    [b, b2],
    [a, a3],
  ] as const)
    await w.until(id, 'succeeded');

  const query = serverQuery(server);
  t.same(await moneyOf(query, a.user.workspaceId), { available: 2_998, reserved: 0, ledgerAvailable: 2_998, ledgerReserved: 0, reservations: [] });
  t.same(await moneyOf(query, b.user.workspaceId), { available: 2_998, reserved: 0, ledgerAvailable: 2_998, ledgerReserved: 0, reservations: [] });
});

t.test('a job waiting for the provider keeps its queue deadline', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 7, 1, 10, 0, 0));
  const server = await startTestServer(t, {
    clock,
    env: { LOCAL_PROVIDER_LATENCY_MS: '600000', LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '1', QUEUE_TIMEOUT_MS: '60000', RATE_LIMIT_PRO: '100000' },
  });
  const a = await proWorkspace(server);
  const first = await a.create('first');
  await a.until(first, 'submitted');
  const second = await a.create('second');
  clock.advance(60_000);
  const expired = await a.until(second, 'expired');
  t.same(
    expired.timeline.map((e) => e.status),
    ['queued', 'expired'],
  );
  t.equal(await a.status(first), 'submitted');
});

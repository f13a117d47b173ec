import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { cancelGeneration, createGeneration, getGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from './flow.ts';

const QUEUE_TIMEOUT_MS = 60_000;

/** Two jobs in flight (the free plan's concurrency) for ten minutes of provider latency, and a third queued behind them. */
async function saturated(server: TestServer) {
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${i}` } });
    if (created.status !== 201) throw new Error(JSON.stringify(created.body));
    ids.push(created.body.id);
  }
  for (const id of ids.slice(0, 2)) await waitFor(server, key, user.workspaceId, id, (g) => g.status === 'submitted', 'submitted');
  return { user, key, inFlight: ids.slice(0, 2), queued: ids[2]! };
}

t.test('a job queued past its deadline expires when the clock moves, and its credits are released', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 9, 0, 0));
  const server = await startTestServer(t, {
    clock,
    env: { LOCAL_PROVIDER_LATENCY_MS: '600000', QUEUE_TIMEOUT_MS: String(QUEUE_TIMEOUT_MS), RATE_LIMIT_FREE: '100000' },
  });
  const query = serverQuery(server);
  const { user, key, inFlight, queued } = await saturated(server);
  t.equal((await getGeneration(server, key, user.workspaceId, queued)).status, 'queued', 'the plan concurrency holds the third job');

  clock.advance(QUEUE_TIMEOUT_MS - 1);
  // Give the actors a chance to act on anything due; nothing is due yet.
  await server.services.actors.drain();
  t.equal((await getGeneration(server, key, user.workspaceId, queued)).status, 'queued', 'not a millisecond early');

  clock.advance(1);
  const expired = await waitFor(server, key, user.workspaceId, queued, isTerminal, 'expired');
  t.equal(expired.status, 'expired');
  t.same(
    expired.timeline.map((e) => e.status),
    ['queued', 'expired'],
  );
  t.equal(expired.completedAt, new Date(Date.UTC(2026, 5, 1, 9, 0, 0) + QUEUE_TIMEOUT_MS).toISOString(), 'completed at the deadline, by the service clock');
  t.equal(expired.errorCode, null);
  for (const id of inFlight) t.equal((await getGeneration(server, key, user.workspaceId, id)).status, 'submitted', 'jobs past the queue never expire');

  const money = await moneyOf(query, user.workspaceId);
  t.same(
    money,
    { available: 98, reserved: 2, ledgerAvailable: 98, ledgerReserved: 2, reservations: [...inFlight].sort() },
    "the expired job's credit came back",
  );
  t.same((await ledgerByGeneration(query, user.workspaceId))[queued], { reserve: 1, release: 1 });
  const again = await cancelGeneration(server, key, user.workspaceId, queued);
  t.equal(again.status, 409, 'an expired job cannot be cancelled');
});

t.test('under the emergency stop a freed slot is not used, so the queued job expires; creates are 503 meanwhile', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 9, 0, 0));
  const server = await startTestServer(t, {
    clock,
    env: { LOCAL_PROVIDER_LATENCY_MS: '600000', QUEUE_TIMEOUT_MS: String(QUEUE_TIMEOUT_MS), RATE_LIMIT_FREE: '100000' },
  });
  const query = serverQuery(server);
  const { user, key, inFlight, queued } = await saturated(server);
  await server.services.switches.setGenerationPaused(true, 'provider outage');

  const refused = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'more' } });
  t.equal(refused.status, 503);
  t.equal(refused.body.error?.code, 'generation_paused');

  const cancelled = await cancelGeneration(server, key, user.workspaceId, inFlight[0]!);
  t.equal(cancelled.status, 200);
  t.equal(cancelled.body.status, 'cancelled');
  t.same(
    cancelled.body.timeline.map((e) => e.status),
    ['queued', 'reserved', 'submitted', 'cancelled'],
  );
  await server.services.actors.drain();
  t.equal((await getGeneration(server, key, user.workspaceId, queued)).status, 'queued', 'a slot is free, but queued jobs wait while paused');

  clock.advance(QUEUE_TIMEOUT_MS);
  const expired = await waitFor(server, key, user.workspaceId, queued, isTerminal, 'expired');
  t.equal(expired.status, 'expired');
  const money = await moneyOf(query, user.workspaceId);
  t.same(
    money,
    { available: 99, reserved: 1, ledgerAvailable: 99, ledgerReserved: 1, reservations: [inFlight[1]!] },
    'cancelled and expired jobs released their credits',
  );
});

import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { ActorCrashedError } from '../../runtime/actor-directory.ts';
import { startTestServer } from '../helpers/server.ts';
import { counterBehavior, persistedState, withCounters } from '../fixtures/counter-actor.ts';

// A short ask time-out: a crash must be answered as a crash, never left to time out (30 s by default).
const ASK_MS = 10_000;

const counter = counterBehavior('counter');
const tally = counterBehavior('tally');
const server = await startTestServer(t, { behaviors: [counter.behavior, tally.behavior], clock: new ManualClock() });
const { db } = server.services;
const actors = withCounters(server.services.actors);

t.test('a crash rejects its asker, restarts the actor from its last persisted state, and spares its siblings', async (t) => {
  t.equal(await actors.ask('counter', 'a', { type: 'inc' }), 1);
  t.equal(await actors.ask('counter', 'a', { type: 'inc' }), 2);
  await actors.ask('counter', 'a', { type: 'set-unpersisted', value: 50 });
  t.same(await actors.ask('counter', 'a', { type: 'get' }), { value: 50, log: [] }, 'in-memory change, not persisted');

  // Siblings: another id of the same kind, and the same id of another kind, each with in-memory state.
  t.equal(await actors.ask('counter', 'b', { type: 'inc' }), 1);
  await actors.ask('counter', 'b', { type: 'set-unpersisted', value: 77 });
  t.equal(await actors.ask('tally', 'a', { type: 'inc' }), 1);
  await actors.ask('tally', 'a', { type: 'set-unpersisted', value: 33 });

  const restarts = actors.stats.restarts;
  const crash = actors.ask('counter', 'a', { type: 'crash' }, ASK_MS);
  const queuedBehind = actors.ask('counter', 'a', { type: 'get' }, ASK_MS);
  const error = await crash.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(error, ActorCrashedError, 'the asker gets ActorCrashedError, not a time-out');
  t.match((error as Error).message, /counter:a.*crash requested for a/);

  t.same(await queuedBehind, { value: 2, log: [] }, 'the message queued behind the crash sees the last persisted state');
  t.equal(actors.stats.restarts, restarts + 1);
  t.equal(counter.probe.loads.get('a'), 2, 'reloaded once');
  t.ok(actors.isLive('counter', 'a'), 'restarted in place');
  t.same(await persistedState(db, 'counter', 'a'), { value: 2, log: [] }, 'the crash wrote nothing');

  t.same(await actors.ask('counter', 'b', { type: 'get' }), { value: 77, log: [] }, 'sibling of the same kind keeps its memory');
  t.same(await actors.ask('tally', 'a', { type: 'get' }), { value: 33, log: [] }, 'actor of another kind keeps its memory');
  t.equal(counter.probe.loads.get('b'), 1, 'sibling not reloaded');
  t.equal(tally.probe.loads.get('a'), 1);

  t.equal(await actors.ask('counter', 'a', { type: 'inc' }), 3, 'the restarted actor goes on from its persisted state');
  t.equal((await server.json('/v1')).status, 200, 'the process and its HTTP front end are still up');
});

t.test('a crash while loading fails that message only; the next one loads again', async (t) => {
  t.equal(await actors.ask('counter', 'c', { type: 'inc', by: 5 }), 5);
  actors.tell('counter', 'c', { type: 'crash' });
  counter.probe.failNextLoad.add('c');
  await t.rejects(actors.ask('counter', 'c', { type: 'get' }, ASK_MS), { name: 'ActorCrashedError', message: /cannot load c/ });
  t.same(await actors.ask('counter', 'c', { type: 'get' }, ASK_MS), { value: 5, log: [] });
  t.equal(counter.probe.loads.get('c'), 3, 'first load, failed reload after the told crash, good reload');
});

t.test('crashes in many actors at once leave every other actor answering', async (t) => {
  const ids = Array.from({ length: 20 }, (_, i) => `m${i}`);
  await Promise.all(ids.map((id) => actors.ask('counter', id, { type: 'inc' })));
  await Promise.all(ids.map((id) => actors.ask('counter', id, { type: 'set-unpersisted', value: 40 })));
  const crashing = ids.filter((_, i) => i % 2 === 0);
  const healthy = ids.filter((_, i) => i % 2 === 1);
  const results = await Promise.allSettled([
    ...crashing.map((id) => actors.ask('counter', id, { type: 'crash' }, ASK_MS)),
    ...healthy.map((id) => actors.ask('counter', id, { type: 'inc' }, ASK_MS)),
  ]);
  const crashed = results.slice(0, crashing.length);
  const served = results.slice(crashing.length);
  t.ok(
    crashed.every((r) => r.status === 'rejected' && r.reason instanceof ActorCrashedError),
    'every crash answered as a crash',
  );
  t.same(
    served.map((r) => (r.status === 'fulfilled' ? r.value : r.reason)),
    healthy.map(() => 41),
    'every healthy actor answered from its own memory',
  );
  for (const id of crashing) t.same(await actors.ask('counter', id, { type: 'get' }), { value: 1, log: [] }, `${id} restarted from its persisted state`);
});

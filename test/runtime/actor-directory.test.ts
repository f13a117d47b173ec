import t, { type Test } from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer } from '../helpers/server.ts';
import { counterBehavior, gate, persistedState, withCounters, type CounterState } from '../fixtures/counter-actor.ts';

/**
 * Actor tests: the real service on a fresh database, with two test kinds and a clock we move by hand.
 * One service for the whole file (starting one is the slow part); each test uses its own ids and
 * counts by difference.
 */
async function start(t: Test) {
  const clock = new ManualClock();
  const counter = counterBehavior('counter');
  const tally = counterBehavior('tally');
  const server = await startTestServer(t, { behaviors: [counter.behavior, tally.behavior], clock, env: { ACTOR_IDLE_MS: '1000' } });
  const { db } = server.services;
  const actors = withCounters(server.services.actors);
  return { server, clock, actors, db, counter: counter.probe, tally: tally.probe };
}
const shared = await start(t);

t.test('get-or-spawn: the first message to a kind and id spawns its actor, later ones reach the same actor', async (t) => {
  const { actors, counter, tally } = shared;
  t.notOk(actors.isLive('counter', 'a'));
  t.equal(await actors.ask('counter', 'a', { type: 'inc' }), 1);
  t.ok(actors.isLive('counter', 'a'));
  t.equal(actors.stats.spawned, 1);
  t.equal(await actors.ask('counter', 'a', { type: 'inc', by: 4 }), 5);
  t.equal(actors.stats.spawned, 1, 'no second spawn for the same id');
  t.equal(counter.loads.get('a'), 1, 'state loaded once');

  // Same id, other kind: a different actor with its own state; other id, same kind: likewise.
  t.equal(await actors.ask('tally', 'a', { type: 'inc' }), 1);
  t.equal(await actors.ask('counter', 'b', { type: 'inc' }), 1);
  t.equal(actors.stats.spawned, 3);
  t.equal(tally.loads.get('a'), 1);
  t.equal(actors.liveCount('counter'), 2);
  t.equal(actors.liveCount('tally'), 1);
  t.equal(actors.liveCount(), 3);
  t.same(await actors.ask('counter', 'a', { type: 'get' }), { value: 5, log: [] });

  // tell reaches the same live actor too.
  actors.tell('counter', 'a', { type: 'inc', by: 10 });
  t.same(await actors.ask('counter', 'a', { type: 'get' }), { value: 15, log: [] });
  t.equal(actors.stats.spawned, 3);

  // @ts-expect-error a kind the directory does not know does not compile; sent anyway, it is refused
  await t.rejects(actors.ask('nosuchkind', 'a', { type: 'get' }), /unknown actor kind nosuchkind/);
});

t.test('any id string names an actor, and distinct ids never share one', async (t) => {
  const { actors } = shared;
  const liveBefore = actors.liveCount('counter');
  // Ids as the domain makes them (prefixes with colons, slashes, spaces, unicode) and look-alikes of their encodings.
  const ids = ['ws:1', 'ws$003a1', 'ws%3A1', 'gen/2024/01', 'a b~c', 'ünï', '$', '$0024', '%24', "it's(1)", '', '\ud800', 'x'.repeat(300)];
  const replies = await Promise.all(ids.map((id, i) => actors.ask('counter', id, { type: 'inc', by: i + 1 })));
  t.same(
    replies,
    ids.map((_, i) => i + 1),
    'each id has its own actor and state',
  );
  for (const id of ids) t.ok(actors.isLive('counter', id), `${JSON.stringify(id).slice(0, 20)} is live`);
  t.equal(actors.liveCount('counter') - liveBefore, ids.length);
});

t.test('many concurrent asks to one cold id spawn exactly one actor and load its state once', async (t) => {
  const { actors, db, counter } = shared;
  const spawnedBefore = actors.stats.spawned;
  const replies = await Promise.all(Array.from({ length: 200 }, () => actors.ask('counter', 'hot', { type: 'inc' })));
  t.equal(actors.stats.spawned - spawnedBefore, 1, 'one spawn');
  t.equal(counter.loads.get('hot'), 1, 'one load');
  t.same(
    [...replies].sort((x, y) => x - y),
    Array.from({ length: 200 }, (_, i) => i + 1),
    'every increment saw the one before it',
  );
  t.equal((await persistedState(db, 'counter', 'hot'))?.value, 200);
  t.equal(counter.maxActive.get('hot'), 1);
});

t.test('messages to one id are handled one at a time, in the order they were sent', async (t) => {
  const { actors, db, counter } = shared;
  const first = gate();
  const items = Array.from({ length: 50 }, (_, i) => `m${i}`);
  // The first message holds the actor; everything after it queues behind it.
  const pending = items.map((item, i) => actors.ask('counter', 'seq', i === 0 ? { type: 'append', item, wait: first.wait } : { type: 'append', item }));
  // Another id is not blocked by the held one.
  t.equal(await actors.ask('counter', 'other', { type: 'inc' }), 1);
  first.open();
  const lengths = await Promise.all(pending);
  t.same(
    lengths,
    items.map((_, i) => i + 1),
    'each reply sees exactly the messages sent before it',
  );
  t.equal(counter.maxActive.get('seq'), 1, 'never two messages at once');
  t.same((await persistedState(db, 'counter', 'seq'))?.log, items, 'persisted in send order');
});

t.test('idle actors are passivated after ACTOR_IDLE_MS; the next message spawns and reloads the persisted state', async (t) => {
  const { actors, clock, counter } = shared;
  t.equal(await actors.ask('counter', 'p', { type: 'inc', by: 7 }), 7);
  // In-memory only: must not survive passivation, since passivation reloads from the database.
  await actors.ask('counter', 'p', { type: 'set-unpersisted', value: 100 });
  const held = gate();
  const busy = actors.ask('counter', 'busy', { type: 'hold', wait: held.wait });

  const passivatedBefore = actors.stats.passivated;
  clock.advance(500);
  t.ok(actors.isLive('counter', 'p'), 'not idle long enough yet');
  clock.advance(1_000);
  t.notOk(actors.isLive('counter', 'p'), 'idle actor stopped');
  t.ok(actors.isLive('counter', 'busy'), 'an actor inside a message is never passivated');
  t.ok(actors.stats.passivated >= passivatedBefore + 1);

  const spawned = actors.stats.spawned;
  t.same(await actors.ask('counter', 'p', { type: 'get' }), { value: 7, log: [] }, 'state reloaded from the database');
  t.equal(actors.stats.spawned, spawned + 1);
  t.equal(counter.loads.get('p'), 2);
  t.equal(await actors.ask('counter', 'p', { type: 'inc' }), 8);

  held.open();
  t.equal(await busy, 0);
  clock.advance(2_000);
  t.notOk(actors.isLive('counter', 'busy'), 'passivated once it went idle');
  t.notOk(actors.isLive('counter', 'p'));
  t.equal(actors.liveCount(), 0);
});

t.test('an outcome with passivate: true stops the actor once its mailbox is empty', async (t) => {
  const { actors, db, counter } = shared;
  const held = gate();
  const hold = actors.ask('counter', 'f', { type: 'hold', wait: held.wait });
  const finish = actors.ask('counter', 'f', { type: 'finish' });
  // Queued behind `finish`: handled by the same actor before it stops (a short time-out so a lost message fails the test).
  const after = actors.ask('counter', 'f', { type: 'inc', by: 3 }, 10_000);
  held.open();
  t.equal(await hold, 0);
  t.equal(await finish, 0);
  t.ok(actors.isLive('counter', 'f'), 'still live while a message is queued');
  t.equal(await after, 3);
  t.notOk(actors.isLive('counter', 'f'), 'stopped once its mailbox emptied');
  t.equal(counter.loads.get('f'), 1, 'all three handled by one incarnation');
  t.equal((await persistedState(db, 'counter', 'f'))?.value, 3);

  t.equal(await actors.ask('counter', 'f', { type: 'inc' }), 4, 'the next message spawns it again from its persisted state');
  t.equal(counter.loads.get('f'), 2);
  t.ok(actors.isLive('counter', 'f'));
});

t.test('an actor whose write is still on its way is not passivated, and a reload after a crash waits for that write', async (t) => {
  const { actors, clock } = shared;
  t.equal(await actors.ask('counter', 'dw', { type: 'inc', by: 5 }), 5);
  const write = gate();
  const deferred = actors.ask('counter', 'dw', { type: 'inc-deferred', wait: write.wait });
  t.same(await actors.ask('counter', 'dw', { type: 'get' }), { value: 6, log: [] }, 'the change is in memory before it is written');
  clock.advance(5_000);
  t.ok(actors.isLive('counter', 'dw'), 'idle, but its write has not committed: kept');

  await t.rejects(actors.ask('counter', 'dw', { type: 'crash' }), /crash requested/);
  let reloaded: CounterState | undefined;
  const afterCrash = actors.ask('counter', 'dw', { type: 'get' }).then((value) => {
    reloaded = value;
  });
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(reloaded, undefined, 'the reload waits for the write');
  write.open();
  t.equal(await deferred, 6);
  await afterCrash;
  t.same(reloaded, { value: 6, log: [] }, 'the reloaded state includes it');
  clock.advance(5_000);
  t.notOk(actors.isLive('counter', 'dw'), 'passivated once its write committed and it went idle');
});

t.test('drain waits for every mailbox; stop refuses new messages after finishing queued ones', async (t) => {
  const { actors, db } = shared;
  const held = gate();
  const hold = actors.ask('counter', 'd', { type: 'hold', wait: held.wait });
  const queued = actors.ask('counter', 'd', { type: 'inc' });
  let drained = false;
  const draining = actors.drain().then(() => {
    drained = true;
  });
  await actors.ask('counter', 'other', { type: 'inc' });
  t.notOk(drained, 'not drained while a message is held');
  held.open();
  await draining;
  t.equal(await hold, 0);
  t.equal(await queued, 1);

  const again = gate();
  const held2 = actors.ask('counter', 'd', { type: 'hold', wait: again.wait });
  const queued2 = actors.ask('counter', 'd', { type: 'inc' });
  let stopped = false;
  const stopping = actors.stop().then(() => {
    stopped = true;
  });
  await t.rejects(actors.ask('counter', 'd', { type: 'get' }), { name: 'DirectoryStoppedError' }, 'new messages refused while stopping');
  t.doesNotThrow(() => actors.tell('counter', 'x', { type: 'inc' }), 'a late tell is dropped, not thrown');
  t.notOk(actors.isLive('counter', 'x'), 'and spawns nothing');
  t.notOk(stopped, 'stop waits for the held message');
  again.open();
  await stopping;
  t.equal(await held2, 1);
  t.equal(await queued2, 2, 'a message queued before stop is still handled');
  t.equal((await persistedState(db, 'counter', 'd'))?.value, 2);
  t.equal(actors.liveCount(), 0);
});

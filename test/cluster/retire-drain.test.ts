import t, { type Test } from 'tap';
import type { ActorBehavior } from '../../runtime/actor-behavior.ts';
import type { Protocol } from '../../runtime/actor-protocol.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { actorTestbed } from '../helpers/actors.ts';
import { gate } from '../fixtures/counter-actor.ts';

/**
 * Before a shard is handed over, retireWorkspaces waits (at most drainMs, on the directory's clock) for the
 * mailboxes of its workspaces' actors to empty: woken when they do, not polled, and bounded by the clock.
 */
async function busyActor(t: Test) {
  const clock = new ManualClock();
  const { actors } = await actorTestbed(t, { clock, ownership: { claimFor: () => ({ shard: 1, epoch: 1 }) } });
  const held = gate();
  const ws: ActorBehavior<{ n: number }, Protocol<{ type: 'hold' }, { hold: number }>> = {
    kind: 'ws',
    load: async () => ({ n: 0 }),
    handlers: {
      hold: async (state) => {
        await held.wait;
        return { state: { n: state.n + 1 }, reply: state.n + 1 };
      },
    },
  };
  actors.register(ws);
  const answered = actors.ask('ws', 'w1', { type: 'hold' });
  return { clock, actors, held, answered };
}

t.test('a busy actor is retired once its mailbox empties, within the drain, with no time passing', async (t) => {
  const { actors, held, answered } = await busyActor(t);
  let retired: number | undefined;
  const retiring = actors
    .retireWorkspaces((workspaceId) => workspaceId === 'w1', 10_000)
    .then((count) => {
      retired = count;
    });
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(retired, undefined, 'still waiting while the message is handled');
  held.open();
  t.equal(await answered, 1);
  await retiring;
  t.equal(retired, 1);
  t.notOk(actors.isLive('ws', 'w1'), 'retired once idle');
});

t.test('an actor still busy at the drain deadline (on the clock) is left to stop when its mailbox empties', async (t) => {
  const { clock, actors, held, answered } = await busyActor(t);
  let retired: number | undefined;
  const retiring = actors
    .retireWorkspaces((workspaceId) => workspaceId === 'w1', 1_000)
    .then((count) => {
      retired = count;
    });
  clock.advance(999);
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(retired, undefined, 'not given up 1 ms before the deadline');
  clock.advance(1);
  await retiring;
  t.equal(retired, 1, 'given up at the deadline');
  t.ok(actors.isLive('ws', 'w1'), 'the busy actor runs on until its mailbox empties');
  held.open();
  t.equal(await answered, 1);
  await actors.drain();
  t.notOk(actors.isLive('ws', 'w1'), 'then it stops');
});

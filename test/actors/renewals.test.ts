import t from 'tap';
import type { ActorBehavior } from '../../runtime/actor-behavior.ts';
import type { Protocol } from '../../runtime/actor-protocol.ts';
import type { ActorKinds } from '../../actors/kinds.ts';
import type { RenewReply } from '../../actors/workspace/protocol.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { createLogger } from '../../runtime/logger.ts';
import { RenewalScheduler } from '../../actors/billing/renewals.ts';
import { actorTestbed } from '../helpers/actors.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * Cluster mode: a shard lost takes its subscriptions' renewal timers with it (the next owner schedules
 * them when it gains the shard); the timers of the workspaces still run here fire as before.
 */
t.test('cancelWhere drops the renewal timers of the matching workspaces only', async (t) => {
  const clock = new ManualClock();
  const logger = createLogger('silent');
  const { db, actors } = await actorTestbed<ActorKinds>(t, { clock });
  // A workspace kind that notes each renewal asked of it and ends the subscription.
  const renewed: string[] = [];
  const ws: ActorBehavior<object, Protocol<{ type: 'renew'; subscriptionId: string }, { renew: RenewReply }>> = {
    kind: 'ws',
    load: async () => ({}),
    handlers: {
      renew: async (state, msg, ctx) => {
        renewed.push(`${ctx.id}/${msg.subscriptionId}`);
        return { state, reply: { nextAt: null } };
      },
    },
  };
  actors.register(ws);
  const renewals = new RenewalScheduler({ clock, logger, db, actors });
  t.teardown(() => renewals.stop());

  const due = clock.now() + 3_600_000;
  renewals.schedule('ws_lost', 'sub_1', due);
  renewals.schedule('ws_lost', 'sub_2', due);
  renewals.schedule('ws_kept', 'sub_3', due);
  t.equal(renewals.pending(), 3);
  t.equal(
    renewals.cancelWhere((workspaceId) => workspaceId === 'ws_lost'),
    2,
    'the two timers of the lost workspace',
  );
  t.equal(renewals.pending(), 1);

  clock.advance(2 * 3_600_000);
  await eventually(() => renewed.length > 0, { what: 'a renewal' });
  await actors.drain();
  t.same(renewed, ['ws_kept/sub_3'], 'only the workspace still run here was asked to renew');
  t.equal(renewals.pending(), 0, 'its subscription ended: nothing left scheduled');
});

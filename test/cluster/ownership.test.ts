import t from 'tap';
import { ShardNotOwnedError } from '../../runtime/actor-directory.ts';
import type { ActorBehavior } from '../../runtime/actor-behavior.ts';
import type { Protocol } from '../../runtime/actor-protocol.ts';
import { bulkWriteOf } from '../../persistence/bulk-write.ts';
import type { Lease } from '../../persistence/cluster/leases.ts';
import { FencedOutError } from '../../persistence/cluster/fence.ts';
import { actorTestbed } from '../helpers/actors.ts';

/**
 * The directory in cluster mode, on PGlite with a recording fence: an actor runs only while its
 * workspace's lease is held, and every write it makes (alone or in a shared bulk write) reaches the
 * batch's fence with that lease.
 */
t.test('actors run only for owned workspaces, and their writes carry the lease to the fence', async (t) => {
  const fenced: Lease[][] = [];
  const leases = new Map<string, Lease>([
    ['w1', { shard: 1, epoch: 7 }],
    ['w2', { shard: 2, epoch: 3 }],
  ]);
  const { writer, actors } = await actorTestbed(t, {
    fence: async (_em, claims) => {
      fenced.push(claims);
    },
    ownership: { claimFor: (workspaceId) => leases.get(workspaceId) },
  });
  const rows = bulkWriteOf<number>(writer, async (em) => {
    await em.execute('select 1');
  });
  const ws: ActorBehavior<{ n: number }, Protocol<{ type: 'write' | 'bulk' }, { write: number; bulk: number }>> = {
    kind: 'ws',
    load: async () => ({ n: 0 }),
    handlers: {
      write: async (state, _msg, ctx) => {
        await ctx.writer.write(async (em) => {
          await em.execute('select 1');
        });
        return { state: { n: state.n + 1 }, reply: state.n + 1 };
      },
      bulk: async (state) => {
        await rows.add(1);
        return { state: { n: state.n + 1 }, reply: state.n + 1 };
      },
    },
  };
  // A child kind whose workspace is in its loaded state, as generations and webhook endpoints.
  const job: ActorBehavior<{ workspaceId: string }, Protocol<{ type: 'write' }, { write: string }>> = {
    kind: 'job',
    load: async (ctx) => ({ workspaceId: ctx.id.split('/')[0]! }),
    workspaceOf: (state) => state.workspaceId,
    handlers: {
      write: async (state, _msg, ctx) => {
        await ctx.writer.write(async (em) => {
          await em.execute('select 1');
        });
        return { state, reply: state.workspaceId };
      },
    },
  };
  actors.register(ws);
  actors.register(job);

  t.equal(await actors.ask('ws', 'w1', { type: 'write' }), 1);
  t.same(fenced.at(-1), [{ shard: 1, epoch: 7 }], "the write was fenced on w1's lease");
  await Promise.all([actors.ask('ws', 'w1', { type: 'bulk' }), actors.ask('ws', 'w2', { type: 'bulk' })]);
  t.same(
    fenced.at(-1),
    [
      { shard: 1, epoch: 7 },
      { shard: 2, epoch: 3 },
    ],
    'one bulk unit of two workspaces: one fence with both leases, in shard order',
  );
  t.equal(await actors.ask('job', 'w2/j1', { type: 'write' }), 'w2');
  t.same(fenced.at(-1), [{ shard: 2, epoch: 3 }], "a child actor writes under its workspace's lease");

  await t.rejects(actors.ask('ws', 'w3', { type: 'write' }), ShardNotOwnedError, 'a workspace of a shard not owned is refused');
  await t.rejects(actors.ask('job', 'w3/j1', { type: 'write' }), ShardNotOwnedError, 'and so are its children, once their workspace is known');

  // The shard of w1 is lost: its actors stop; taken back at a later epoch, a new actor starts under it.
  leases.delete('w1');
  t.equal(await actors.retireWorkspaces((workspaceId) => workspaceId === 'w1'), 1);
  t.notOk(actors.isLive('ws', 'w1'));
  await t.rejects(actors.ask('ws', 'w1', { type: 'write' }), ShardNotOwnedError);
  leases.set('w1', { shard: 1, epoch: 9 });
  t.equal(await actors.ask('ws', 'w1', { type: 'write' }), 1, 'a fresh actor, loaded again');
  t.same(fenced.at(-1), [{ shard: 1, epoch: 9 }]);

  // A live actor whose lease changed under it (lost and regained without being stopped) refuses, then stops.
  leases.set('w2', { shard: 2, epoch: 4 });
  await t.rejects(actors.ask('job', 'w2/j1', { type: 'write' }), ShardNotOwnedError, 'an actor started under an older epoch does not run');
  t.equal(await actors.ask('job', 'w2/j1', { type: 'write' }), 'w2', 'its next incarnation runs under the new epoch');
  t.same(fenced.at(-1), [{ shard: 2, epoch: 4 }]);
});

t.test('a write fenced out (the shard moved on before it committed) is answered as a shard not owned, not as a crash', async (t) => {
  // The database refuses the batch's claims, as cluster_fence does once another node holds the shard.
  const { actors } = await actorTestbed(t, {
    fence: async (_em, claims) => {
      throw new FencedOutError('me', claims);
    },
    ownership: { claimFor: () => ({ shard: 1, epoch: 7 }) },
  });
  const ws: ActorBehavior<object, Protocol<{ type: 'inline' | 'deferred' }, { inline: string; deferred: string }>> = {
    kind: 'ws',
    load: async () => ({}),
    handlers: {
      inline: async (state, _msg, ctx) => {
        await ctx.writer.write(async (em) => {
          await em.execute('select 1');
        });
        return { state, reply: 'done' };
      },
      deferred: (state, _msg, ctx) => {
        const written = ctx.writer.write(async (em) => {
          await em.execute('select 1');
        });
        return { state, replyWhenDurable: written.then(() => 'done') };
      },
    },
  };
  actors.register(ws);
  await t.rejects(actors.ask('ws', 'w1', { type: 'deferred' }), ShardNotOwnedError, 'a reply waiting for its write');
  await t.rejects(actors.ask('ws', 'w1', { type: 'inline' }), ShardNotOwnedError, 'a message that awaited its write');
});

import t from 'tap';
import type { ActorBehavior } from '../../runtime/actor-behavior.ts';
import type { Protocol } from '../../runtime/actor-protocol.ts';
import type { ActorKinds } from '../../actors/kinds.ts';
import { systemClock } from '../../runtime/clock.ts';
import { generationRecovery } from '../../actors/generation-recovery.ts';
import { actorTestbed, everyMessage } from '../helpers/actors.ts';

/**
 * What the recovery of unfinished generations asks of the actors (probe kinds in place of the real ones):
 * each job in flight is resumed by its own actor; a queued job is left to its workspace's actor, which
 * loads it with its deadline, so thousands of queued jobs cost no actor each.
 */
t.test('recovery resumes the jobs in flight, and wakes the workspaces without an actor per queued job', async (t) => {
  const { db, actors } = await actorTestbed<ActorKinds>(t);
  const seen: string[] = [];
  const probe = (kind: string): ActorBehavior<object, Protocol> => ({
    kind,
    load: async () => ({}),
    handlers: everyMessage(async (state: object, msg: { type: string }, ctx: { id: string }) => {
      seen.push(`${kind}:${ctx.id}:${msg.type}`);
      return { state, reply: {} };
    }),
  });
  actors.register(probe('ws'));
  actors.register(probe('gen'));
  const em = db.em();
  for (const ws of ['ws_busy', 'ws_waiting', 'ws_done']) {
    await em.execute(`insert into workspaces (id, name, plan, created_at, updated_at) values (?, ?, 'pro', now(), now())`, [ws, ws]);
  }
  const jobs: Array<[string, string, string]> = [
    ['gen_1', 'ws_busy', 'running'],
    ['gen_2', 'ws_busy', 'submitted'],
    ['gen_3', 'ws_busy', 'reserved'],
    ['gen_4', 'ws_busy', 'queued'],
    ['gen_5', 'ws_waiting', 'queued'],
    ['gen_6', 'ws_waiting', 'queued'],
    ['gen_7', 'ws_done', 'succeeded'],
  ];
  for (const [id, ws, status] of jobs) {
    await em.execute(
      `insert into generations (id, workspace_id, mode, model_id, status, params, inputs, payment_mode, credits, provider, timeline, queue_deadline, created_at, updated_at)
       values (?, ?, 'text_to_text', 'local/text-mini', ?, '{}', '{}', 'credits', 1, 'local', '[]', now(), now(), now())`,
      [id, ws, status],
    );
  }
  t.equal(await generationRecovery(db, actors, systemClock).run(), 6, 'six unfinished jobs');
  await actors.drain();
  t.same(
    seen.filter((s) => s.startsWith('gen:')).sort(),
    ['gen:gen_1:recover', 'gen:gen_2:recover', 'gen:gen_3:recover'],
    'only the jobs in flight get an actor',
  );
  t.same(
    seen.filter((s) => s.startsWith('ws:')).sort(),
    ['ws:ws_busy:preloaded', 'ws:ws_busy:schedule', 'ws:ws_waiting:schedule'],
    'each workspace with unfinished jobs is woken; the one with jobs in flight first loads, from the record read with the others',
  );
  t.equal(actors.liveCount('gen'), 3);
});

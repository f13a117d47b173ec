import t from 'tap';
import { generationRowOf } from '../../persistence/entities/generation.ts';
import { generationActor } from '../../actors/generation/actor.ts';
import { ProviderRegistry, type ProviderJob } from '../../providers/provider.ts';
import { actorTestbed, everyMessage } from '../helpers/actors.ts';
import type { ActorKinds } from '../../actors/kinds.ts';
import type { ActorDeps } from '../../actors/deps.ts';
import { HeldJobs } from '../../actors/generation/held-jobs.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * A job reserved in its creation's transaction goes to its provider when its workspace says start, also
 * once its shard has begun to drain: the drain counts a reserved job as in flight and waits for it, so a
 * job left reserved would hold the handover back until the drain's deadline. While generation is paused
 * it waits instead, its workspace told to hold it.
 */
t.test('a job reserved at its creation starts while its shard drains; it waits while generation is paused', async (t) => {
  const { db, actors } = await actorTestbed<ActorKinds, ActorDeps>(t);
  const submitted: string[] = [];
  const told: string[] = [];
  let paused = false;
  const held = new HeldJobs();
  actors.register({
    kind: 'ws',
    load: async () => ({}),
    handlers: everyMessage(async (state: object, msg: { type: string; generationId?: string }, ctx: { id: string }) => {
      told.push(`${ctx.id}:${msg.type}:${msg.generationId}`);
      return { state, reply: undefined };
    }),
  });
  actors.register(generationActor);
  actors.provideDeps({
    providers: new ProviderRegistry().add({
      name: 'local',
      async submit(job: ProviderJob) {
        submitted.push(job.generationId);
        return { providerJobId: `p_${job.generationId}` };
      },
      cancel() {},
    }),
    inputs: { resolve: async () => ({}) },
    generationPaused: () => paused,
    handingOver: () => true,
    held,
    // What the generation actor uses of ActorDeps on this path, and nothing more.
  } as unknown as ActorDeps);
  const em = db.em();
  await em.execute(`insert into workspaces (id, name, plan, created_at, updated_at) values ('ws_1', 'ws_1', 'pro', now(), now())`);
  const reserved = async (id: string) => {
    await em.execute(
      `insert into generations (id, workspace_id, mode, model_id, status, attempts, params, inputs, payment_mode, credits, provider, timeline, queue_deadline, created_at, updated_at)
       values (?, 'ws_1', 'text_to_text', 'local/text-mini', 'reserved', 1, '{}', '{}', 'credits', 1, 'local', '[]', now() + interval '10 minutes', now(), now())`,
      [id],
    );
    return rowOf(id);
  };
  const rowOf = async (id: string) => {
    const [raw] = await em.execute<Record<string, unknown>[]>('select * from generations where id = ?', [id]);
    return generationRowOf(raw!);
  };

  actors.tell('gen', 'gen_1', { type: 'start', row: await reserved('gen_1') });
  await actors.drain();
  await eventually(() => submitted.length > 0, { what: 'a submission' });
  t.same(submitted, ['gen_1'], 'handed to its provider although its shard is draining');

  paused = true;
  actors.tell('gen', 'gen_2', { type: 'start', row: await reserved('gen_2') });
  await actors.drain();
  t.same(submitted, ['gen_1'], 'not while generation is paused');
  t.ok(told.includes('ws_1:hold_recovered:gen_2'), 'its workspace holds it until the stop is lifted');
  t.same(held.ids(), ['gen_2'], 'held: a drain of its shard does not wait for it');

  // The stop is lifted: its workspace tells it to recover, and it goes to its provider, no longer held.
  paused = false;
  const version = held.version;
  actors.tell('gen', 'gen_2', { type: 'recover', row: await rowOf('gen_2') });
  await actors.drain();
  await eventually(() => submitted.length >= 2, { what: 'a second submission' });
  t.same(submitted, ['gen_1', 'gen_2'], 'handed to its provider once the stop is lifted');
  t.same(held.ids(), [], 'released: a drain counts it again');
  t.ok(held.version > version, 'the release moves the version, so no count made before it is used after');
});

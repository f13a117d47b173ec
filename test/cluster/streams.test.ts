import t from 'tap';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { LIFECYCLE, openEventSource } from '../streams/support.ts';
import { clusterDatabase, clusterEnv, NEEDS_POSTGRES_REDIS, ownerOf, startCluster } from './support.ts';

const SHARDS = 8;

t.test('a stream served by one node sees the transitions of a generation whose actor another node owns', { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const db = await clusterDatabase(t);
  const { nodes } = await startCluster(
    t,
    db,
    ['a', 'b'],
    clusterEnv(db.url, SHARDS, {
      LOCAL_PROVIDER_LATENCY_MS: '300',
      CLUSTER_HEARTBEAT_MS: '500',
      CLUSTER_DEAD_AFTER_MS: '6000',
      CLUSTER_LEASE_MS: '6000',
    }),
    SHARDS,
  );
  const user = await signUp(nodes[0]!.client);
  const { key } = await createKey(nodes[0]!.client, user.cookie, user.workspaceId, ['generations.read', 'generations.write']);
  const owner = await ownerOf(db, user.workspaceId, SHARDS);
  const streamer = nodes.find((node) => node.id !== owner)!;
  const ownerNode = nodes.find((node) => node.id === owner)!;
  t.not(streamer.id, ownerNode.id, `the workspace runs on ${owner}, the streams are on ${streamer.id}`);

  const auth = { authorization: `Bearer ${key}` };
  const workspaceStream = openEventSource(streamer.client, `/v1/events/stream?workspaceId=${user.workspaceId}`, auth);
  await workspaceStream.until(() => workspaceStream.events.some((e) => e.event === 'ready'), 'ready');
  let created: { status: number; body: any } | undefined;
  for (let i = 0; i < 50; i++) {
    created = await ownerNode.client.json('/v1/generations', {
      method: 'POST',
      headers: withKey(key),
      body: JSON.stringify({ workspaceId: user.workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'hello' } }),
    });
    if (created.status !== 503) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  t.equal(created!.status, 201);
  const id = created!.body.id as string;
  const generationStream = openEventSource(streamer.client, `/v1/generations/${id}/stream?workspaceId=${user.workspaceId}`, auth);
  await generationStream.until(() => generationStream.events.some((e) => e.event === 'end'), 'end of the generation stream');
  generationStream.close();
  await workspaceStream.until(() => workspaceStream.events.some((e) => e.data.generationId === id && e.data.status === 'succeeded'), 'the workspace stream');
  workspaceStream.close();
  t.same(
    workspaceStream.events.filter((e) => e.event === 'transition').map((e) => e.id),
    LIFECYCLE.map((_, seq) => `${id}.${seq}`),
    'every transition, in order, on the other node',
  );
  const [state, ...rest] = generationStream.events;
  t.same(
    [...state!.data.timeline.map((e: { status: string }) => e.status), ...rest.filter((e) => e.event === 'transition').map((e) => e.data.status)],
    LIFECYCLE,
  );
  t.equal(rest.at(-1)!.event, 'end');
});

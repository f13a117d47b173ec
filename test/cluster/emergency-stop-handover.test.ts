import t from 'tap';
import { writeGenerationPaused } from '../../runtime/switches.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { clusterDatabase, clusterEnv, eventually, evenlySpread, NEEDS_POSTGRES_REDIS, nodeReady, ownerOf, startCluster, startClusterNode } from './support.ts';

const SHARDS = 4;
const DRAIN_DEADLINE = /jobs still in flight at the drain deadline/;
const HELD = /a job in flight at the restart waits for the emergency stop to be lifted/;

/**
 * During the emergency stop a job in flight at a crash is recovered and held, at no provider. A handover
 * of its shard does not wait for it (nothing would end it) until the drain's deadline: it moves at once,
 * and the next owner holds it in turn; once the stop is lifted it goes to its provider, once.
 */
t.test("a job held during the emergency stop does not hold its shard's handover back; the next owner holds it", { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const db = await clusterDatabase(t);
  // A drain deadline the test would notice: a handover that waited for the held job would log at 20 s.
  const env = clusterEnv(db.url, SHARDS, { LOCAL_PROVIDER_LATENCY_MS: '600000', LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: '20000' });
  const {
    nodes: [first],
    dataDir,
  } = await startCluster(t, db, ['a'], env, SHARDS);
  const user = await signUp(first!.client);
  const { key } = await createKey(first!.client, user.cookie, user.workspaceId, ['all']);
  const ws = user.workspaceId;
  const created = await first!.client.json('/v1/generations', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({ workspaceId: ws, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'held' } }),
  });
  t.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.id as string;
  const row = async () =>
    (await db.em().execute<Array<{ status: string; attempts: number }>>('select status, attempts from generations where id = ?', [id]))[0]!;
  const atProvider = await eventually(
    'the job at its provider',
    async () => {
      const r = await row();
      return ['submitted', 'running'].includes(r.status) ? r : undefined;
    },
    10_000,
    20,
  );

  // The stop, then a crash of the node that runs the job; it comes back and holds the job.
  await writeGenerationPaused(db, true, 'provider outage', Date.now());
  await eventually(
    'node a paused',
    async () => ((await first!.client.json('/v1/generations/emergency-stop', { headers: withKey(key) })).body?.paused === true ? true : undefined),
    10_000,
    100,
  );
  first!.child.proc.kill('SIGKILL');
  await first!.child.exited;
  const a = await startClusterNode(t, 'a', env, dataDir);
  await nodeReady(a);
  await a.child.line(HELD, 30_000);
  t.same(await row(), atProvider, 'held by the restarted node: in flight, sent to no provider again');

  // A second node joins (half the shards move to it), then the first stops (the rest move): each handover
  // drains its shard first. Neither waits for the held job.
  const b = await startClusterNode(t, 'b', env, dataDir);
  await nodeReady(b);
  await evenlySpread(db, SHARDS, 2);
  const stopping = Date.now();
  a.child.proc.kill('SIGTERM');
  const exit = await a.child.exited;
  t.equal(exit.code, 0, 'the first node stopped cleanly');
  t.comment(`node a stopped ${Date.now() - stopping} ms after SIGTERM (drain deadline 20,000 ms)`);
  t.notOk(
    a.child.lines.some((line) => DRAIN_DEADLINE.test(line)),
    'no drain ran to its deadline for the held job',
  );
  t.ok(
    a.child.lines.some((line) => /shard drained before handover/.test(line) && line.includes(`"shard":${shardOf(ws, SHARDS)}`)),
    "the job's shard was drained and handed over",
  );
  t.equal(await ownerOf(db, ws, SHARDS), 'b', 'the second node owns it now');
  await b.child.line(HELD, 30_000);
  t.same(await row(), atProvider, 'the next owner holds it too: still sent to no provider again');

  // The stop is lifted: the job goes to its provider, once.
  await writeGenerationPaused(db, false, null, Date.now());
  await eventually('the job resubmitted', async () => ((await row()).attempts === 2 ? true : undefined), 20_000, 100);
  t.match(await row(), { status: /^(submitted|running)$/, attempts: 2 }, 'handed to its provider again once the stop was lifted (attempt 2 of 3)');
});

import t from 'tap';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { catalogFile, plan, servedVersion, textModel, until } from '../catalog/support.ts';
import { clusterDatabase, clusterEnv, NEEDS_POSTGRES_REDIS, sendRetryingMoves, startCluster } from './support.ts';

/**
 * Two cluster nodes reading the same catalog file (a shared volume, a ConfigMap each): once the file is
 * replaced, both serve the new version (docs/catalog.md, "The version"), and a create of the new model is
 * taken through either node, at its new price, whichever node owns the workspace.
 */
const SHARDS = 8;
const writer = (credits: number) => textModel('acme/writer', { per: 'job', credits }, ['basic']);

t.test('two nodes serve the new catalog version once the file they read changes', { skip: NEEDS_POSTGRES_REDIS }, async (t) => {
  const file = catalogFile(t, { defaultPlan: 'basic', plans: [plan('basic')], models: [writer(2)] });
  const db = await clusterDatabase(t);
  const { nodes } = await startCluster(
    t,
    db,
    ['catalog-a', 'catalog-b'],
    clusterEnv(db.url, SHARDS, { CATALOG_FILE: file.file, LOCAL_PROVIDER_LATENCY_MS: '0' }),
    SHARDS,
  );
  const before = await Promise.all(nodes.map((node) => servedVersion(node.url)));
  t.equal(before[0], before[1], 'both nodes serve one version');

  const user = await signUp(nodes[0]!.client);
  const { key } = await createKey(nodes[0]!.client, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);

  const writtenAt = performance.now();
  file.swap({ defaultPlan: 'basic', plans: [plan('basic')], models: [writer(6), textModel('acme/newcomer', { per: 'job', credits: 9 }, ['basic'])] });
  const seen = await Promise.all(
    nodes.map((node) =>
      until(
        `${node.id} serves the new version`,
        async () => {
          const version = await servedVersion(node.url);
          return version !== undefined && version !== before[0] ? { version, afterMs: Math.round(performance.now() - writtenAt) } : undefined;
        },
        20_000,
        10,
      ),
    ),
  );
  t.equal(seen[0]!.version, seen[1]!.version, 'both serve the same new version');
  t.pass(`${nodes[0]!.id} served it ${seen[0]!.afterMs} ms after the file changed, ${nodes[1]!.id} ${seen[1]!.afterMs} ms after`);

  for (const node of nodes) {
    const created = await sendRetryingMoves(node, '/v1/generations', {
      method: 'POST',
      headers: withKey(key, { 'content-type': 'application/json' }),
      body: JSON.stringify({ workspaceId: user.workspaceId, mode: 'text_to_text', model: 'acme/newcomer', params: { prompt: `through ${node.id}` } }),
    });
    t.equal(created.status, 201, `the new model created through ${node.id} (${created.status} ${JSON.stringify(created.body?.error ?? '')})`);
    t.equal(created.body.credits, 9, 'at its price');
    const repriced = await sendRetryingMoves(node, '/v1/generations', {
      method: 'POST',
      headers: withKey(key, { 'content-type': 'application/json' }),
      body: JSON.stringify({ workspaceId: user.workspaceId, mode: 'text_to_text', model: 'acme/writer', params: { prompt: `through ${node.id}` } }),
    });
    t.equal(repriced.body.credits, 6, `the changed price served by ${node.id}`);
    const models = await node.client.json(`/v1/models?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
    t.equal(models.headers.get('etag'), `"${seen[0]!.version}-basic"`, `${node.id}'s models list carries the new version`);
  }
});

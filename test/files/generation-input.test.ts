import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { uploadAsset } from './support.ts';
import { eventually } from '../helpers/eventually.ts';

t.test('an uploaded image drives an image_to_image generation on the local provider', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const createRoute = server.http.router.routes.some((route) => route.def.method === 'POST' && route.def.path === '/v1/generations');
  t.ok(createRoute, 'POST /v1/generations is in the route table');
  if (!createRoute) return;
  const user = await signUp(server);
  const other = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  const auth = { authorization: `Bearer ${key}` };
  const asset = await uploadAsset(server, auth, user.workspaceId, makePng(16, 16));
  const foreign = await uploadAsset(server, { cookie: other.cookie }, other.workspaceId, makePng(4, 4));
  const body = (ids: string[]) =>
    JSON.stringify({
      workspaceId: user.workspaceId,
      mode: 'image_to_image',
      model: 'local/image-edit',
      params: { prompt: 'make it blue' },
      inputs: { imageAssetIds: ids },
    });
  const refused = await server.json('/v1/generations', { method: 'POST', headers: withKey(key), body: body([foreign.id]) });
  t.equal(refused.status, 400, "another workspace's asset is not an input");
  const created = await server.json('/v1/generations', { method: 'POST', headers: withKey(key), body: body([asset.id]) });
  t.equal(created.status, 201, JSON.stringify(created.body));
  const done = await eventually(
    async () => {
      const g = (await server.json(`/v1/generations/${created.body.id}?workspaceId=${user.workspaceId}`, { headers: withKey(key) })).body;
      return ['succeeded', 'failed'].includes(g.status) && g;
    },
    { timeoutMs: 30_000, everyMs: 25, what: 'the generation ending' },
  );
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(done.outputAssetIds.length, 1);
  const output = await server.json(`/v1/assets/${done.outputAssetIds[0]}?workspaceId=${user.workspaceId}`, { headers: auth });
  t.match(output.body, { mediaType: 'image', contentType: 'image/png', sourceGenerationId: created.body.id });
  const list = await server.json(`/v1/assets?workspaceId=${user.workspaceId}&sourceGenerationId=${created.body.id}`, { headers: auth });
  t.same(
    list.body.data.map((a: any) => a.id),
    done.outputAssetIds,
  );
  const url = await server.json(`/v1/assets/${done.outputAssetIds[0]}/download?workspaceId=${user.workspaceId}`, { headers: auth });
  const png = Buffer.from(await (await fetch(url.body.url)).arrayBuffer());
  t.equal(png.subarray(1, 4).toString(), 'PNG');
  const storage = await server.json(`/v1/workspaces/${user.workspaceId}/storage`, { headers: auth });
  t.equal(storage.body.counts.image, 2);
});

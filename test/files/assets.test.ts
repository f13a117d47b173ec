import t from 'tap';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { sharedTestServer } from '../helpers/server.ts';
import { authMatrix, createKey, signUp } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { isError, rows } from '../identity/support.ts';
import { call, uploadAsset } from './support.ts';
import { createAsset } from '../../persistence/assets/store.ts';
import { assetStorageKey } from '../../persistence/blob-store/types.ts';
import { newId } from '../../persistence/ids.ts';

const wav = () => Buffer.concat([Buffer.from('RIFF'), Buffer.from([36, 0, 0, 0]), Buffer.from('WAVEfmt '), Buffer.alloc(28)]);
const mp4 = () => Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from('ftypisom'), Buffer.alloc(12)]);

t.test('list: newest first, filters by favorite, mediaType and sourceGenerationId, cursor pages', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const ws = owner.workspaceId;
  await rows(server, "update workspaces set plan = 'team' where id = ?", [ws]);

  const image = await uploadAsset(server, auth, ws, makePng(4, 4), { filename: 'a.png' });
  const sound = await uploadAsset(server, auth, ws, wav(), { filename: 'a.wav', contentType: 'audio/wav' });
  const clip = await uploadAsset(server, auth, ws, mp4(), { filename: 'a.mp4', contentType: 'video/mp4' });
  // Outputs of a generation, stored the way the generation actor stores them.
  const generationId = 'gen_01jtestgeneration000000000';
  const outputs: string[] = [];
  for (let i = 0; i < 3; i++) {
    const id = newId('ast');
    const storageKey = assetStorageKey(ws, id);
    const png = makePng(8, 8);
    await server.services.blobs.put(storageKey, png, 'image/png');
    await server.services.db.em().transactional((em) =>
      createAsset(em as SqlEntityManager, {
        id,
        workspaceId: ws,
        mediaType: 'image',
        contentType: 'image/png',
        bytes: png.length,
        width: 8,
        height: 8,
        sourceGenerationId: generationId,
        storageKey,
        limitBytes: Number.MAX_SAFE_INTEGER,
      }),
    );
    outputs.push(id);
  }
  await call(server, auth, 'PATCH', `/v1/assets/${sound.id}`, { favorite: true });

  const ids = async (query: string) => (await call(server, auth, 'GET', `/v1/assets?workspaceId=${ws}${query}`)).body.data.map((a: { id: string }) => a.id);
  t.same(await ids(''), [...outputs].reverse().concat([clip.id, sound.id, image.id]), 'newest first');
  t.same(await ids('&mediaType=audio'), [sound.id]);
  t.same(await ids('&mediaType=video'), [clip.id]);
  t.same(await ids('&favorite=true'), [sound.id]);
  t.same(await ids('&favorite=false&mediaType=image'), [...outputs].reverse().concat([image.id]));
  t.same(await ids(`&sourceGenerationId=${generationId}`), [...outputs].reverse());
  t.same(await ids('&sourceGenerationId=gen_nothing'), []);

  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { body: any } = await call(server, auth, 'GET', `/v1/assets?workspaceId=${ws}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.ok(page.body.data.length <= 2);
    seen.push(...page.body.data.map((a: { id: string }) => a.id));
    cursor = page.body.nextCursor;
  } while (cursor);
  t.same(seen, await ids(''), 'pages join up to the whole list');

  const storage = await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`);
  t.match(storage.body, { plan: 'team', counts: { image: 4, video: 1, audio: 1 }, uploadMediaTypes: ['image', 'video', 'audio'] });

  for (const query of ['&mediaType=text', '&favorite=maybe', '&limit=0', '&limit=101', '&cursor=garbage', '&color=red']) {
    isError(t, await call(server, auth, 'GET', `/v1/assets?workspaceId=${ws}${query}`), 400, 'validation_error', query);
  }
  isError(t, await call(server, auth, 'GET', '/v1/assets'), 400, 'validation_error', 'workspaceId is required');
});

t.test('PATCH sets favorite and name; bad patches are refused', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const asset = await uploadAsset(server, auth, owner.workspaceId, makePng());
  const renamed = await call(server, auth, 'PATCH', `/v1/assets/${asset.id}`, { name: '  Holiday  ', favorite: true });
  t.match(renamed.body, { name: 'Holiday', favorite: true });
  const cleared = await call(server, auth, 'PATCH', `/v1/assets/${asset.id}`, { name: null, favorite: false });
  t.match(cleared.body, { name: null, favorite: false });
  t.same((await call(server, auth, 'GET', `/v1/assets/${asset.id}`)).body, cleared.body, 'stored');
  for (const [label, body] of [
    ['empty', {}],
    ['name with a slash', { name: 'a/b' }],
    ['blank name', { name: '' }],
    ['favorite as text', { favorite: 'yes' }],
    ['bytes', { bytes: 1 }],
    ['contentType', { contentType: 'text/html' }],
    ['storage key', { storageKey: 'x' }],
  ] as Array<[string, unknown]>) {
    isError(t, await call(server, auth, 'PATCH', `/v1/assets/${asset.id}`, body), 400, 'validation_error', label);
  }
  isError(t, await call(server, auth, 'PATCH', '/v1/assets/ast_missing', { favorite: true }), 404, 'not_found');
  isError(t, await call(server, auth, 'DELETE', '/v1/assets/ast_missing'), 404, 'not_found');
});

t.test('scopes: assets.read reads, files.write writes, usage.read sees storage', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const asset = await uploadAsset(server, { cookie: owner.cookie }, ws, makePng());
  const key = async (scope: Parameters<typeof createKey>[3]) => ({ authorization: `Bearer ${(await createKey(server, owner.cookie, ws, scope)).key}` });
  const reader = await key(['assets.read']);
  const writer = await key(['files.write']);
  const usage = await key(['usage.read']);
  t.equal((await call(server, reader, 'GET', `/v1/assets/${asset.id}?workspaceId=${ws}`)).status, 200);
  t.equal((await call(server, reader, 'GET', `/v1/assets/${asset.id}/download?workspaceId=${ws}`)).status, 200);
  isError(t, await call(server, reader, 'PATCH', `/v1/assets/${asset.id}`, { workspaceId: ws, favorite: true }), 403, 'forbidden', 'assets.read cannot update');
  isError(
    t,
    await call(server, reader, 'POST', '/v1/files/upload-url', { workspaceId: ws, filename: 'a.png', contentType: 'image/png', bytes: 10 }),
    403,
    'forbidden',
    'nor upload',
  );
  isError(t, await call(server, writer, 'GET', `/v1/assets?workspaceId=${ws}`), 403, 'forbidden', 'files.write cannot list');
  t.equal((await call(server, writer, 'PATCH', `/v1/assets/${asset.id}`, { workspaceId: ws, favorite: true })).status, 200);
  isError(t, await call(server, writer, 'GET', `/v1/workspaces/${ws}/storage`), 403, 'forbidden', 'files.write cannot read storage');
  t.equal((await call(server, usage, 'GET', `/v1/workspaces/${ws}/storage`)).status, 200);
  isError(t, await call(server, reader, 'GET', `/v1/assets/${asset.id}`), 403, 'forbidden', 'a key must name its workspace');
  t.equal((await call(server, writer, 'DELETE', `/v1/assets/${asset.id}?workspaceId=${ws}`)).status, 204);
});

t.test('auth matrix over the files and assets routes', async (t) => {
  const server = await sharedTestServer();
  await authMatrix(t, server, (route) => route.tags.includes('files') || route.tags.includes('assets'));
});

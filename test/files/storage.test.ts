import t from 'tap';
import { sharedTestServer } from '../helpers/server.ts';
import { signUp } from '../helpers/identity.ts';
import { pngOfSize } from '../helpers/files.ts';
import { isError, rows } from '../identity/support.ts';
import { call, complete, putBytes, requestUpload, uploadAsset } from './support.ts';
import { shippedCatalog } from '../helpers/catalog.ts';

/** What the storage account says, next to what the assets add up to. */
async function accounts(server: Parameters<typeof rows>[0], workspaceId: string) {
  const [stored] = await rows(server, 'select used_bytes, image_count from workspace_storage where workspace_id = ?', [workspaceId]);
  const [summed] = await rows(server, 'select coalesce(sum(bytes), 0) as bytes, count(*) as n from assets where workspace_id = ?', [workspaceId]);
  return { used: Number(stored?.used_bytes ?? 0), images: Number(stored?.image_count ?? 0), sum: Number(summed.bytes), count: Number(summed.n) };
}

t.test('storage stays exact under concurrent uploads and deletes', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const ws = owner.workspaceId;
  const sizes = Array.from({ length: 16 }, (_, i) => 200 + i * 37);
  const first = await Promise.all(sizes.map((size) => uploadAsset(server, auth, ws, pngOfSize(size))));
  let state = await accounts(server, ws);
  t.equal(
    state.used,
    sizes.reduce((a, b) => a + b, 0),
    'used bytes are the sum of the uploads',
  );
  t.equal(state.images, 16);

  // Half of them deleted while as many new ones complete, all at once; each delete sent twice.
  const doomed = first.slice(0, 8);
  const more = sizes.slice(0, 8).map((size) => size + 1000);
  const results = await Promise.all([
    ...doomed.flatMap((asset) => [0, 1].map(() => call(server, auth, 'DELETE', `/v1/assets/${asset.id}`))),
    ...more.map((size) => uploadAsset(server, auth, ws, pngOfSize(size)).then(() => ({ status: 201 }))),
  ]);
  const deletes = results
    .slice(0, 16)
    .map((r) => r.status)
    .sort();
  t.same(deletes, [...Array(8).fill(204), ...Array(8).fill(404)], 'each asset is deleted once; the twin request finds it gone');
  state = await accounts(server, ws);
  t.equal(state.used, state.sum, 'used bytes equal the sum over the remaining assets');
  t.equal(state.images, state.count, 'and the count per media type is the number of assets');
  t.equal(state.count, 16);
  const storage = await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`);
  t.match(storage.body, { usedBytes: state.sum, counts: { image: 16 } });
});

t.test('the storage limit holds under concurrent completions: exactly the files that fit are kept', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const ws = owner.workspaceId;
  const limit = shippedCatalog().plan('free').storageBytes;
  const size = 1000;
  // The workspace is 5 files short of full (set directly: uploading a gibibyte would only slow the test).
  await rows(server, 'insert into workspace_storage (workspace_id, used_bytes) values (?, ?)', [ws, limit - 5 * size]);
  const intents = await Promise.all(Array.from({ length: 8 }, () => requestUpload(server, auth, ws, size)));
  for (const intent of intents) t.equal((await putBytes(intent, pngOfSize(size))).status, 200);
  const done = await Promise.all(intents.map((intent) => complete(server, auth, ws, intent.uploadId)));
  const statuses = done.map((r) => r.status).sort();
  t.same(statuses, [201, 201, 201, 201, 201, 422, 422, 422], 'five fit, three are refused');
  for (const refused of done.filter((r) => r.status === 422)) {
    t.equal(refused.body.error.code, 'plan_limit_reached');
    t.match(refused.body.error.message, /Storage limit reached/);
  }
  const [stored] = await rows(server, 'select used_bytes from workspace_storage where workspace_id = ?', [ws]);
  t.equal(Number(stored.used_bytes), limit, 'used bytes are exactly the limit, never past it');
  const keys = await rows(server, 'select storage_key from uploads where workspace_id = ? and completed_at is null', [ws]);
  t.equal(keys.length, 3);
  for (const { storage_key } of keys) t.equal(await server.services.blobs.stat(storage_key), undefined, "a refused upload's bytes are discarded");

  isError(
    t,
    await call(server, auth, 'POST', '/v1/files/upload-url', { workspaceId: ws, filename: 'a.png', contentType: 'image/png', bytes: 1 }),
    422,
    'plan_limit_reached',
    /Storage limit reached/,
  );
  const storage = await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`);
  t.match(storage.body, { usedBytes: limit, limitBytes: limit, availableBytes: 0 });

  // Deleting one frees exactly its bytes, and the next upload fits again.
  const [one] = await rows(server, 'select id from assets where workspace_id = ? limit 1', [ws]);
  t.equal((await call(server, auth, 'DELETE', `/v1/assets/${one.id}`)).status, 204);
  t.equal((await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`)).body.availableBytes, size);
  await uploadAsset(server, auth, ws, pngOfSize(size));
  t.equal((await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`)).body.availableBytes, 0);
});

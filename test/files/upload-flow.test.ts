import t from 'tap';
import type { Test } from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { makePng, pngOfSize } from '../helpers/files.ts';
import { startS3 } from '../helpers/s3.ts';
import { call, complete, putBytes, requestUpload } from './support.ts';
import { rows } from '../identity/support.ts';

/** The four steps of the upload flow (docs/assets.md), then everything one can do with the asset, on one back end. */
async function wholeFlow(t: Test, server: TestServer, expectUrl: RegExp) {
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['files.write', 'assets.read', 'usage.read']);
  const auth = { authorization: `Bearer ${key.key}` };
  const ws = owner.workspaceId;
  const png = makePng(7, 3);

  // (1) upload URL
  const intent = await call(server, auth, 'POST', '/v1/files/upload-url', {
    workspaceId: ws,
    filename: 'cat photo.png',
    contentType: 'image/png',
    bytes: png.length,
    mediaType: 'image',
  });
  t.equal(intent.status, 201);
  t.match(intent.body, { uploadId: /^upl_[0-9a-z]{26}$/, url: expectUrl, method: 'PUT', headers: { 'Content-Type': 'image/png' } });
  const expiresIn = Date.parse(intent.body.expiresAt) - server.services.clock.now();
  t.ok(expiresIn > 14 * 60_000 && expiresIn <= 15 * 60_000, 'the upload URL lives 15 minutes');

  // (2) PUT the bytes
  const put = await putBytes(intent.body, png);
  t.equal(put.status, 200, 'PUT accepted');

  // (3) complete
  const done = await complete(server, auth, ws, intent.body.uploadId);
  t.equal(done.status, 201);
  const asset = done.body;
  t.same(Object.keys(asset).sort(), [
    'bytes',
    'contentType',
    'createdAt',
    'durationSeconds',
    'favorite',
    'height',
    'id',
    'mediaType',
    'name',
    'sourceGenerationId',
    'width',
    'workspaceId',
  ]);
  t.match(asset, {
    id: /^ast_/,
    workspaceId: ws,
    mediaType: 'image',
    contentType: 'image/png',
    bytes: png.length,
    width: 7,
    height: 3,
    favorite: false,
    name: 'cat photo.png',
    sourceGenerationId: null,
    durationSeconds: null,
  });

  // (4) the asset id is what generations take; here: detail, list, download
  const detail = await call(server, auth, 'GET', `/v1/assets/${asset.id}?workspaceId=${ws}`);
  t.same(detail.body, asset, 'detail is the asset');
  const list = await call(server, auth, 'GET', `/v1/assets?workspaceId=${ws}`);
  t.same(list.body, { data: [asset], nextCursor: null });
  const download = await call(server, auth, 'GET', `/v1/assets/${asset.id}/download?workspaceId=${ws}`);
  t.equal(download.status, 200);
  const downloadLife = Date.parse(download.body.expiresAt) - server.services.clock.now();
  t.ok(downloadLife > 4 * 60_000 && downloadLife <= 5 * 60_000, 'the download URL lives 5 minutes');
  const got = await fetch(download.body.url);
  t.equal(got.status, 200);
  t.equal(got.headers.get('content-type'), 'image/png');
  t.match(got.headers.get('content-disposition') ?? '', /^attachment; filename="cat photo.png"/);
  t.ok(Buffer.from(await got.arrayBuffer()).equals(png), 'the downloaded bytes are the uploaded ones');

  const storage = await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`);
  t.match(storage.body, { workspaceId: ws, plan: 'free', usedBytes: png.length, limitBytes: 1024 ** 3, counts: { image: 1, video: 0, audio: 0 } });

  const patched = await call(server, auth, 'PATCH', `/v1/assets/${asset.id}`, { workspaceId: ws, favorite: true, name: 'Best cat' });
  t.equal(patched.status, 200);
  t.match(patched.body, { favorite: true, name: 'Best cat', bytes: png.length });
  const favourites = await call(server, auth, 'GET', `/v1/assets?workspaceId=${ws}&favorite=true`);
  t.same(
    favourites.body.data.map((a: { id: string }) => a.id),
    [asset.id],
  );

  const [row] = await rows(server, 'select storage_key from assets where id = ?', [asset.id]);
  t.ok(await server.services.blobs.stat(row.storage_key), 'the bytes are stored');
  const removed = await call(server, auth, 'DELETE', `/v1/assets/${asset.id}?workspaceId=${ws}`);
  t.equal(removed.status, 204);
  t.equal(await server.services.blobs.stat(row.storage_key), undefined, 'the bytes are gone');
  const after = await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`);
  t.match(after.body, { usedBytes: 0, counts: { image: 0, video: 0, audio: 0 } }, 'storage is freed');
  t.equal((await call(server, auth, 'GET', `/v1/assets/${asset.id}?workspaceId=${ws}`)).status, 404);
  t.equal((await fetch(download.body.url)).status >= 400, true, 'the old download URL no longer gives the bytes');

  // A file larger than the JSON body limit streams through (3 MiB against a 1 MiB limit).
  const big = pngOfSize(3 * 1024 * 1024);
  const bigIntent = await requestUpload(server, auth, ws, big.length, { filename: 'big.png' });
  t.equal((await putBytes(bigIntent, big)).status, 200, 'a 3 MiB PUT is accepted');
  const bigAsset = await complete(server, auth, ws, bigIntent.uploadId);
  t.equal(bigAsset.status, 201);
  const bigUrl = await call(server, auth, 'GET', `/v1/assets/${bigAsset.body.id}/download?workspaceId=${ws}`);
  const bigBytes = Buffer.from(await (await fetch(bigUrl.body.url)).arrayBuffer());
  t.ok(bigBytes.equals(big), 'and downloads whole');
}

t.test('local blob store: the four-step flow, download, update, delete', async (t) => {
  const server = await startTestServer(t);
  await wholeFlow(t, server, /^http:\/\/127\.0\.0\.1:\d+\/v1\/blobs\/upload\?/);
});

t.test('S3-compatible storage: the same flow against a loopback S3 server', async (t) => {
  const s3 = await startS3(t);
  const server = await startTestServer(t, { env: s3.env });
  t.equal(server.services.blobs.kind, 's3');
  await wholeFlow(t, server, new RegExp(`^${s3.endpoint}/${s3.bucket}/uploads/`));
});

t.test('S3-compatible storage: upload-complete refuses what the storage let through', async (t) => {
  const s3 = await startS3(t);
  const server = await startTestServer(t, { env: s3.env });
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const ws = owner.workspaceId;
  const png = makePng();

  const text = Buffer.alloc(png.length, 'a');
  const fake = await requestUpload(server, auth, ws, text.length);
  t.equal((await putBytes(fake, text)).status, 200, 'the storage takes any bytes');
  const sniffed = await complete(server, auth, ws, fake.uploadId);
  t.equal(sniffed.status, 400);
  t.equal(sniffed.body.error.code, 'validation_error');
  t.match(sniffed.body.error.message, /not image\/png/);

  const typed = await requestUpload(server, auth, ws, png.length);
  t.equal((await putBytes(typed, png, { 'Content-Type': 'text/html' })).status, 200);
  const wrongType = await complete(server, auth, ws, typed.uploadId);
  t.equal(wrongType.status, 400);
  t.match(wrongType.body.error.message, /uploaded as text\/html/);
  t.equal((await putBytes(typed, png)).status, 200, 'the refused object was removed, so the URL takes the right one');
  t.equal((await complete(server, auth, ws, typed.uploadId)).status, 201);

  const sized = await requestUpload(server, auth, ws, png.length + 10);
  await fetch(sized.url, { method: 'PUT', headers: sized.headers, body: png });
  const wrongSize = await complete(server, auth, ws, sized.uploadId);
  t.equal(wrongSize.status, 400);
  t.match(wrongSize.body.error.message, /bytes, not the declared/);
  const storage = await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`);
  t.equal(storage.body.usedBytes, png.length, 'only the accepted file counts');
});

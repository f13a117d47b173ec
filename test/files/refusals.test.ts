import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { sharedTestServer, startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { isError, rows } from '../identity/support.ts';
import { call, complete, putBytes, requestUpload, uploadAsset } from './support.ts';

t.test('upload-url refuses bad declarations with validation_error, and plan limits with plan_limit_reached', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const base = { workspaceId: owner.workspaceId, filename: 'a.png', contentType: 'image/png', bytes: 100 };
  const refused: Array<[string, unknown, number, string, RegExp]> = [
    ['path traversal', { ...base, filename: '../../etc/passwd.png' }, 400, 'validation_error', /without directories/],
    ['absolute path', { ...base, filename: '/tmp/a.png' }, 400, 'validation_error', /without directories/],
    ['backslash path', { ...base, filename: '..\\..\\a.png' }, 400, 'validation_error', /without directories/],
    ['dot-dot name', { ...base, filename: '..' }, 400, 'validation_error', /file name/],
    ['control characters', { ...base, filename: 'a\u0001.png' }, 400, 'validation_error', /control characters/],
    ['U+0000, refused with every unstorable string', { ...base, filename: 'a\u0000.png' }, 400, 'validation_error', /body\.filename: must not contain U\+0000/],
    ['empty name', { ...base, filename: '' }, 400, 'validation_error', /filename/],
    ['negative size', { ...base, bytes: -1 }, 400, 'validation_error', /bytes/],
    ['zero size', { ...base, bytes: 0 }, 400, 'validation_error', /bytes/],
    ['fractional size', { ...base, bytes: 1.5 }, 400, 'validation_error', /bytes/],
    ['absurd size', { ...base, bytes: 1e300 }, 400, 'validation_error', /bytes/],
    ['size as text', { ...base, bytes: '100' }, 400, 'validation_error', /bytes/],
    ['unsupported type', { ...base, filename: 'a.html', contentType: 'text/html' }, 400, 'validation_error', /not a supported file type/],
    ['media type not matching the content type', { ...base, mediaType: 'video' }, 400, 'validation_error', /is image, not video/],
    ['extension not matching the content type', { ...base, filename: 'a.jpg' }, 400, 'validation_error', /extension says image\/jpeg/],
    ['unknown field', { ...base, path: '/etc' }, 400, 'validation_error', /unknown field/],
    [
      'type the plan does not allow (video on free)',
      { ...base, filename: 'a.mp4', contentType: 'video/mp4' },
      422,
      'plan_limit_reached',
      /does not allow video/,
    ],
    ['file larger than the plan allows', { ...base, bytes: 25 * 1024 * 1024 + 1 }, 422, 'plan_limit_reached', /at most 26214400 bytes/],
    ['huge but representable size', { ...base, bytes: Number.MAX_SAFE_INTEGER }, 422, 'plan_limit_reached', /at most/],
  ];
  for (const [label, body, status, code, message] of refused) {
    isError(t, await call(server, auth, 'POST', '/v1/files/upload-url', body), status, code, message);
    t.comment(label);
  }
  t.same(await rows(server, 'select id from uploads'), [], 'no upload intent was made');

  const ok = await call(server, auth, 'POST', '/v1/files/upload-url', { ...base, contentType: 'IMAGE/PNG; charset=binary', filename: 'no-extension' });
  t.equal(ok.status, 201, 'content types are matched case-insensitively, parameters dropped, names without extension accepted');
  t.same(ok.body.headers, { 'Content-Type': 'image/png' });
});

t.test('the signed PUT refuses forged, tampered, mistyped, wrongly sized and reused uploads', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const ws = owner.workspaceId;
  const png = makePng();
  const intent = await requestUpload(server, auth, ws, png.length);
  const url = new URL(intent.url);
  const withParam = (name: string, value: string) => {
    const copy = new URL(url);
    copy.searchParams.set(name, value);
    return { ...intent, url: copy.toString() };
  };

  const forged = await putBytes(withParam('sig', 'f'.repeat(64)), png);
  t.equal(forged.status, 403, 'forged signature');
  t.equal(forged.body.error.code, 'forbidden');
  t.equal((await putBytes(withParam('sig', 'not-hex'), png)).status, 403, 'malformed signature');
  t.equal((await putBytes(withParam('len', String(png.length + 1000)), png)).status, 403, 'a larger length than signed');
  t.equal((await putBytes(withParam('ct', 'image/gif'), png)).status, 403, 'another content type than signed');
  t.equal((await putBytes(withParam('exp', String(Number(url.searchParams.get('exp')) + 3600)), png)).status, 403, 'a later expiry than signed');
  const otherKey = url.searchParams.get('key')!.replace(/upl_\w+$/, 'upl_00000000000000000000000000');
  t.equal((await putBytes(withParam('key', otherKey), png)).status, 403, 'another object key than signed');
  t.equal((await putBytes(withParam('key', '../../../etc/passwd'), png)).status, 403, 'a traversing key');
  const missing = new URL(url);
  missing.searchParams.delete('sig');
  t.equal((await putBytes({ ...intent, url: missing.toString() }, png)).status, 400, 'no signature at all');

  const mistyped = await putBytes(intent, png, { 'Content-Type': 'text/html' });
  t.equal(mistyped.status, 403, 'a Content-Type other than the signed one');
  t.match(mistyped.body.error.message, /signed for Content-Type: image\/png/);

  const tooLong = await putBytes(intent, Buffer.concat([png, Buffer.alloc(10)]));
  t.equal(tooLong.status, 413, 'more bytes than signed');
  t.equal(tooLong.body.error.code, 'payload_too_large');
  const tooShort = await putBytes(intent, png.subarray(0, png.length - 1));
  t.equal(tooShort.status, 400, 'fewer bytes than signed');
  t.equal((await complete(server, auth, ws, intent.uploadId)).status, 409, 'nothing was stored by the refused PUTs');

  t.equal((await putBytes(intent, png)).status, 200, 'the right bytes are taken');
  const again = await putBytes(intent, png);
  t.equal(again.status, 409, 'a second PUT to the same URL');
  t.equal(again.body.error.code, 'conflict');
  t.equal((await complete(server, auth, ws, intent.uploadId)).status, 201);
  const reused = await putBytes(intent, png);
  t.equal(reused.status, 409, 'the URL of a completed upload is spent');
  t.match(reused.body.error.message, /already completed/);
  t.equal((await complete(server, auth, ws, intent.uploadId)).status, 409, 'completing twice');
});

t.test('expired upload and download URLs are refused (clock moved past them)', async (t) => {
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const ws = owner.workspaceId;
  const png = makePng();
  const intent = await requestUpload(server, auth, ws, png.length);
  clock.advance(15 * 60_000 + 1000);
  const late = await putBytes(intent, png);
  t.equal(late.status, 403, 'upload URL past its 15 minutes');
  t.match(late.body.error.message, /not valid or has expired/);

  const fresh = await requestUpload(server, auth, ws, png.length);
  clock.advance(14 * 60_000);
  t.equal((await putBytes(fresh, png)).status, 200, 'still valid at 14 minutes');
  const asset = (await complete(server, auth, ws, fresh.uploadId)).body;
  const download = await call(server, auth, 'GET', `/v1/assets/${asset.id}/download`);
  clock.advance(4 * 60_000);
  t.equal((await fetch(download.body.url)).status, 200, 'download URL valid at 4 minutes');
  clock.advance(61_000);
  const expired = await fetch(download.body.url);
  t.equal(expired.status, 403, 'download URL past its 5 minutes');
  t.equal(((await expired.json()) as any).error.code, 'forbidden');

  // An upload left uncompleted past its grace hour can no longer be completed.
  const abandoned = await requestUpload(server, auth, ws, png.length);
  t.equal((await putBytes(abandoned, png)).status, 200);
  clock.advance(15 * 60_000 + 60 * 60_000 + 1000);
  isError(t, await complete(server, auth, ws, abandoned.uploadId), 409, 'conflict', /expired/);
  // ...and the next upload URL of the workspace sweeps it and its bytes away.
  const [row] = await rows(server, 'select storage_key from uploads where id = ?', [abandoned.uploadId]);
  t.ok(await server.services.blobs.stat(row.storage_key));
  await requestUpload(server, auth, ws, png.length);
  t.same(await rows(server, 'select id from uploads where id = ?', [abandoned.uploadId]), [], 'the intent is swept');
  t.equal(await server.services.blobs.stat(row.storage_key), undefined, 'with its bytes');
});

t.test('a download URL cannot be altered to fetch another object', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const ws = owner.workspaceId;
  const first = await uploadAsset(server, auth, ws, makePng(1, 1));
  const second = await uploadAsset(server, auth, ws, makePng(2, 2));
  const url = new URL((await call(server, auth, 'GET', `/v1/assets/${first.id}/download`)).body.url);
  const [row] = await rows(server, 'select storage_key from assets where id = ?', [second.id]);
  for (const [name, value] of [
    ['key', row.storage_key],
    ['ct', 'text/html'],
    ['fn', 'x.html'],
    ['exp', '9999999999'],
    ['sig', '0'.repeat(64)],
  ]) {
    const altered = new URL(url);
    altered.searchParams.set(name!, value!);
    const res = await fetch(altered);
    t.equal(res.status, 403, `altered ${name}`);
  }
});

t.test('upload-complete sniffs the bytes: a text file named .png is refused and removed', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const ws = owner.workspaceId;
  const cases: Array<[string, string, Buffer, RegExp]> = [
    ['text named .png', 'image/png', Buffer.from('hello, I am plain text and not a picture at all'), /not a supported media file/],
    ['HTML named .png', 'image/png', Buffer.from('<html><script>alert(1)</script></html>'), /not image\/png/],
    ['a GIF declared as PNG', 'image/png', Buffer.concat([Buffer.from('GIF89a'), Buffer.alloc(20)]), /looks like image\/gif/],
    ['a PNG declared as JPEG', 'image/jpeg', makePng(), /looks like image\/png/],
  ];
  for (const [label, contentType, bytes, message] of cases) {
    const filename = contentType === 'image/png' ? 'x.png' : 'x.jpg';
    const intent = await requestUpload(server, auth, ws, bytes.length, { filename, contentType });
    t.equal((await putBytes(intent, bytes)).status, 200, `${label}: stored by the PUT`);
    isError(t, await complete(server, auth, ws, intent.uploadId), 400, 'validation_error', message);
    const [row] = await rows(server, 'select storage_key, completed_at from uploads where id = ?', [intent.uploadId]);
    t.equal(row.completed_at, null, `${label}: not completed`);
    t.equal(await server.services.blobs.stat(row.storage_key), undefined, `${label}: its bytes removed`);
  }
  t.same(await rows(server, 'select id from assets'), [], 'no asset was made');
  t.equal((await call(server, auth, 'GET', `/v1/workspaces/${ws}/storage`)).body.usedBytes, 0);
});

t.test("isolation: another workspace's uploads and assets are not found, and its keys are refused", async (t) => {
  const server = await sharedTestServer();
  const a = await signUp(server);
  const b = await signUp(server);
  const keyA = await createKey(server, a.cookie, a.workspaceId, ['all']);
  const keyB = await createKey(server, b.cookie, b.workspaceId, ['all']);
  const png = makePng();
  const asset = await uploadAsset(server, { cookie: a.cookie }, a.workspaceId, png);
  const pending = await requestUpload(server, { cookie: a.cookie }, a.workspaceId, png.length);
  await putBytes(pending, png);

  const bCookie = { cookie: b.cookie };
  const bKey = { authorization: `Bearer ${keyB.key}` };
  // B names its own workspace: A's ids are simply not there.
  isError(t, await complete(server, bCookie, b.workspaceId, pending.uploadId), 404, 'not_found', "completing someone else's upload");
  isError(t, await complete(server, bKey, b.workspaceId, pending.uploadId), 404, 'not_found', 'the same with a key');
  for (const [method, path, body] of [
    ['GET', `/v1/assets/${asset.id}?workspaceId=${b.workspaceId}`],
    ['GET', `/v1/assets/${asset.id}/download?workspaceId=${b.workspaceId}`],
    ['PATCH', `/v1/assets/${asset.id}`, { workspaceId: b.workspaceId, favorite: true }],
    ['DELETE', `/v1/assets/${asset.id}?workspaceId=${b.workspaceId}`],
  ] as Array<[string, string, unknown?]>) {
    isError(t, await call(server, bKey, method, path, body), 404, 'not_found', `${method} ${path.split('?')[0]} with B's key`);
    const session = await call(server, bCookie, method, path.replace(`?workspaceId=${b.workspaceId}`, ''), body === undefined ? undefined : { favorite: true });
    isError(t, session, 404, 'not_found', `${method} ${path.split('?')[0]} with B's session`);
  }
  // B names A's workspace: its key is refused, its session is not a member.
  isError(t, await complete(server, bKey, a.workspaceId, pending.uploadId), 403, 'forbidden', "B's key naming A's workspace");
  isError(t, await complete(server, bCookie, a.workspaceId, pending.uploadId), 404, 'not_found', "B's session naming A's workspace");
  isError(t, await call(server, bCookie, 'GET', `/v1/assets?workspaceId=${a.workspaceId}`), 404, 'not_found', "listing A's assets");
  isError(t, await call(server, bCookie, 'GET', `/v1/workspaces/${a.workspaceId}/storage`), 404, 'not_found', "A's storage");
  isError(t, await call(server, bKey, 'GET', `/v1/workspaces/${a.workspaceId}/storage`), 403, 'forbidden', "A's storage with B's key");
  t.same((await call(server, bKey, 'GET', `/v1/assets?workspaceId=${b.workspaceId}`)).body.data, [], 'B lists nothing of A');

  // Nothing of A changed, and A still completes its own upload.
  const still = await call(server, { authorization: `Bearer ${keyA.key}` }, 'GET', `/v1/assets/${asset.id}?workspaceId=${a.workspaceId}`);
  t.same(still.body, asset);
  t.equal((await complete(server, { cookie: a.cookie }, a.workspaceId, pending.uploadId)).status, 201);
});

import t from 'tap';
import net from 'node:net';
import fs from 'node:fs/promises';
import path from 'node:path';
import { startTestServer } from '../helpers/server.ts';
import { signUp } from '../helpers/identity.ts';
import { makePng, pngOfSize } from '../helpers/files.ts';
import { eventually } from '../helpers/eventually.ts';
import { rows } from '../identity/support.ts';
import { complete, requestUpload } from './support.ts';

t.test('a client that goes away mid-upload leaves nothing behind, and the server carries on', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const size = 2 * 1024 * 1024;
  const intent = await requestUpload(server, auth, owner.workspaceId, size);
  const url = new URL(intent.url);
  const [row] = await rows(server, 'select storage_key from uploads where id = ?', [intent.uploadId]);
  const dir = path.join(server.config.dataDir, 'blobs', ...row.storage_key.split('/').slice(0, -1));
  const ofThisObject = async () => (await fs.readdir(dir).catch(() => [] as string[])).filter((name) => name.startsWith(row.storage_key.split('/').pop()!));

  const socket = net.connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(`PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: image/png\r\nContent-Length: ${size}\r\n\r\n`);
  socket.write(pngOfSize(size).subarray(0, size / 4));
  t.ok(await eventually(async () => (await ofThisObject()).length > 0, { what: 'a temporary file' }), 'the server is streaming the body into a temporary file');
  socket.destroy();
  t.ok(await eventually(() => server.http.inFlight() === 0, { what: 'no request in flight' }), 'the aborted request is finished');

  t.equal(await server.services.blobs.stat(row.storage_key), undefined, 'no object was published');
  t.same(await ofThisObject(), [], 'no temporary file is left');
  t.equal((await server.fetch('/v1')).status, 200, 'the server still answers');
  t.equal(server.http.inFlight(), 0, 'nothing is left in flight after another request');

  // The same URL still takes the whole file.
  const whole = await fetch(intent.url, { method: 'PUT', headers: intent.headers, body: pngOfSize(size) });
  t.equal(whole.status, 200);
  t.equal((await complete(server, auth, owner.workspaceId, intent.uploadId)).status, 201);
});

t.test('a chunked body without Content-Length is held to the signed length while it streams', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const auth = { cookie: owner.cookie };
  const png = makePng();
  const chunked = (parts: Buffer[]) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const part of parts) controller.enqueue(part);
        controller.close();
      },
    });
  const intent = await requestUpload(server, auth, owner.workspaceId, png.length);
  const over = await fetch(intent.url, { method: 'PUT', headers: intent.headers, body: chunked([png, Buffer.alloc(5)]), duplex: 'half' } as RequestInit);
  t.equal(over.status, 413, 'one byte too many is refused');
  const fits = await fetch(intent.url, {
    method: 'PUT',
    headers: intent.headers,
    body: chunked([png.subarray(0, 10), png.subarray(10)]),
    duplex: 'half',
  } as RequestInit);
  t.equal(fits.status, 200, 'the exact length in several chunks is taken');
  t.equal((await complete(server, auth, owner.workspaceId, intent.uploadId)).status, 201);
});

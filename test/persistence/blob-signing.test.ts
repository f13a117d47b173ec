import t from 'tap';
import type { Test } from 'tap';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadSigningSecret, UrlSigner } from '../../persistence/blob-store/signing.ts';
import { createBlobStore } from '../../persistence/blob-store/index.ts';
import type { LocalBlobStore } from '../../persistence/blob-store/local.ts';

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'blob-signing-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

t.test('a generated secret is kept in DATA_DIR, so a restarted service accepts the URLs it gave out', async (t) => {
  const dir = await tempDir(t);
  const secrets = await Promise.all(Array.from({ length: 8 }, () => loadSigningSecret(undefined, dir)));
  t.ok(
    secrets.every((s) => s.equals(secrets[0]!)),
    'processes starting together agree on one secret',
  );
  t.equal(secrets[0]!.length, 32);
  const file = path.join(dir, 'blob-signing-secret');
  t.equal((await stat(file)).mode & 0o777, 0o600, 'readable by the service only');
  t.match(await readFile(file, 'utf8'), /^[0-9a-f]{64}$/);

  const now = () => Date.UTC(2026, 0, 1);
  const before = (await createBlobStore({ kind: 'local', dataDir: dir, baseUrl: () => 'http://svc', signingSecret: undefined }, now)) as LocalBlobStore;
  const upload = await before.presignUpload('uploads/ws_1/upl_1', { contentType: 'image/png', bytes: 10, expiresInSeconds: 900 });
  const after = (await createBlobStore({ kind: 'local', dataDir: dir, baseUrl: () => 'http://svc', signingSecret: undefined }, now)) as LocalBlobStore;
  const q = new URL(upload.url).searchParams;
  const query = { key: q.get('key')!, exp: Number(q.get('exp')), ct: q.get('ct')!, len: Number(q.get('len')), sig: q.get('sig')! };
  t.ok(after.verifyUpload(query), 'the restarted store verifies the old URL');
  t.notOk(after.verifyUpload({ ...query, len: 11 }), 'but not an altered one');
});

t.test('a configured secret is used as given; another secret does not verify', async (t) => {
  const dir = await tempDir(t);
  const secret = 'x'.repeat(40);
  t.same(await loadSigningSecret(secret, dir), Buffer.from(secret));
  const a = new UrlSigner(Buffer.from(secret));
  const b = new UrlSigner(Buffer.from('y'.repeat(40)));
  const sig = a.sign(['upload', 'k', 1, 'image/png', 5]);
  t.ok(a.verify(['upload', 'k', 1, 'image/png', 5], sig));
  t.notOk(b.verify(['upload', 'k', 1, 'image/png', 5], sig));
  t.notOk(a.verify(['upload', 'k', 1, 'image/png', 6], sig));
  t.notOk(a.verify(['upload', 'k', 1, 'image/png', 5], sig.toUpperCase()), 'only lower-case hex');
  t.notOk(a.verify(['upload', 'k', 1, 'image/png', 5], sig.slice(2)), 'wrong length');
  // Field boundaries cannot be moved: ["a","bc"] and ["ab","c"] sign differently.
  t.not(a.sign(['a', 'bc']), a.sign(['ab', 'c']));
});

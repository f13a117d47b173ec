import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { catalogFile, plan, servedVersion, textModel, until } from './support.ts';

/**
 * GET /v1/models as a cache revalidates it (docs/catalog.md, "Where the catalog shows"): its ETag is the
 * catalog version and the plan; If-None-Match with that tag answers 304 with no body, any other tag (or the
 * old one after a reload) the list again with its new tag.
 */
const document = (credits: number) => ({
  defaultPlan: 'basic',
  plans: [plan('basic')],
  models: [textModel('acme/writer', { per: 'job', credits }, ['basic'])],
});

t.test('If-None-Match: 304 while the catalog is the same, 200 with the new tag after a reload', async (t) => {
  const file = catalogFile(t, document(2));
  const server = await startTestServer(t, { env: { CATALOG_FILE: file.file } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.read']);
  const get = (headers: Record<string, string> = {}) =>
    server.fetch(`/v1/models?workspaceId=${user.workspaceId}`, { headers: { authorization: `Bearer ${key}`, ...headers } });

  const first = await get();
  t.equal(first.status, 200);
  const etag = first.headers.get('etag')!;
  t.match(etag, /^"[0-9a-f]+-basic"$/, 'an ETag of version and plan');
  await first.arrayBuffer();

  for (const header of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
    const again = await get({ 'if-none-match': header });
    t.equal(again.status, 304, `If-None-Match: ${header} → 304`);
    t.equal(again.headers.get('etag'), etag, 'with the ETag');
    t.equal((await again.arrayBuffer()).byteLength, 0, 'and no body');
  }
  const other = await get({ 'if-none-match': '"something-else"' });
  t.equal(other.status, 200, 'another tag: the list');
  t.equal(((await other.json()) as { data: unknown[] }).data.length, 1);

  const v1 = await until('ready', () => servedVersion(server.url));
  file.swap(document(5));
  await until('the new catalog served', async () => ((await servedVersion(server.url)) !== v1 ? true : undefined));
  const changed = await get({ 'if-none-match': etag });
  t.equal(changed.status, 200, 'the old tag after a reload: the list again');
  t.not(changed.headers.get('etag'), etag, 'with the new tag');
  t.equal(((await changed.json()) as { data: Array<{ credits: number }> }).data[0]!.credits, 5, 'and the new price');
});

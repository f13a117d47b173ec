import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { DASHBOARD_CSP, loadDashboard } from '../../http/dashboard.ts';
import { DASHBOARD_DIST } from '../../dashboard/build.ts';
import { ensureDashboardBuilt } from './support.ts';

/** The web dashboard's files as the service serves them at `/`, beside an API whose 404s stay JSON envelopes. */
await ensureDashboardBuilt();

t.test('pages, files, caching and the API around them', async (t) => {
  const server = await startTestServer(t);
  const built = await fs.readdir(path.join(DASHBOARD_DIST, '_app'));
  const script = built.find((name) => name.endsWith('.js'))!;
  const style = built.find((name) => name.endsWith('.css'))!;

  const root = await server.fetch('/');
  const html = await root.text();
  t.equal(root.status, 200, 'GET / is the dashboard');
  t.equal(root.headers.get('content-type'), 'text/html; charset=utf-8');
  t.equal(root.headers.get('content-security-policy'), DASHBOARD_CSP, 'with its Content-Security-Policy');
  t.match(root.headers.get('content-security-policy'), /script-src 'self'(;|$)/, "which allows only the service's own scripts");
  t.equal(root.headers.get('x-frame-options'), 'DENY');
  t.equal(root.headers.get('x-content-type-options'), 'nosniff');
  t.equal(root.headers.get('cache-control'), 'no-cache', 'the page is revalidated on every load');
  t.match(html, `<script type="module" src="/_app/${script}">`, 'it loads the built script');
  t.notMatch(html, /https?:\/\//, 'and nothing from another host');

  const again = await server.fetch('/', { headers: { 'if-none-match': root.headers.get('etag')! } });
  t.equal(again.status, 304, 'a page unchanged since its ETag is 304');
  t.equal(await again.text(), '', 'without a body');

  const js = await server.fetch(`/_app/${script}`);
  t.equal(js.status, 200);
  t.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8', 'scripts with their type');
  t.equal(js.headers.get('cache-control'), 'public, max-age=31536000, immutable', 'content-hashed files are cached for good');
  t.equal(Buffer.from(await js.arrayBuffer()).length, (await fs.stat(path.join(DASHBOARD_DIST, '_app', script))).size, 'whole');
  const css = await server.fetch(`/_app/${style}`);
  t.equal(css.headers.get('content-type'), 'text/css; charset=utf-8', 'styles with theirs');
  await css.arrayBuffer();

  for (const route of ['/login', '/keys', '/generations/gen_123', '/assets', '/playground?x=1']) {
    const page = await server.fetch(route);
    t.equal(page.status, 200, `${route}: an app route`);
    t.equal(await page.text(), html, `${route}: answers index.html`);
  }

  const envelope = async (target: string, init?: RequestInit) => {
    const response = await server.fetch(target, init);
    const body = (await response.json()) as { error: { code: string } };
    return { status: response.status, type: response.headers.get('content-type'), body };
  };
  for (const target of ['/v1/nowhere', '/v1/generations/x/nowhere', '/health/nowhere', '/_app/missing.js', '/favicon.ico']) {
    const answer = await envelope(target);
    t.equal(answer.status, 404, `${target}: 404`);
    t.equal(answer.type, 'application/json; charset=utf-8', `${target}: a JSON envelope, not the page`);
    t.equal(answer.body.error.code, 'not_found', `${target}: not_found`);
  }
  t.equal((await envelope('/', { method: 'POST' })).status, 404, 'POST / is no page: 404 envelope');
  t.equal((await envelope('/keys', { method: 'DELETE' })).body.error.code, 'not_found', 'nor is DELETE /keys');
  t.equal((await server.json('/v1')).body.name, 'generation-service', 'the API root is still the API');

  // No request path reaches the file system: files are looked up by exact name among those built.
  for (const target of [
    '/../package.json',
    '/%2e%2e/package.json',
    '/_app/../../package.json',
    '/..%2f..%2fpackage.json',
    '/_app/%2e%2e%2f%2e%2e%2fpackage.json',
    '//etc/passwd',
  ]) {
    const answer = await rawRequest(Number(new URL(server.url).port), `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    t.notMatch(answer, /"name":\s*"generation-service"|root:x:0/, `${target}: no file outside the build`);
  }
});

t.test('what is read from the build is bounded', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-dashboard-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  await fs.mkdir(path.join(dir, '_app'));
  await fs.writeFile(path.join(dir, 'index.html'), '<!doctype html><title>x</title>');
  await fs.writeFile(path.join(dir, '_app', 'small.js'), 'export {}');
  await fs.writeFile(path.join(dir, '_app', 'huge.js'), Buffer.alloc(5 * 1024 * 1024, 0x20));
  await fs.writeFile(path.join(dir, '_app', 'secret.env'), 'TOKEN=1');
  await fs.symlink('/etc/passwd', path.join(dir, '_app', 'passwd.txt'));
  const dashboard = loadDashboard(dir);
  t.same([...dashboard.files.keys()].sort(), ['/_app/small.js', '/index.html'], 'oversized files, unknown types and links are left out');
  t.equal(loadDashboard(path.join(dir, 'nowhere')).index, undefined, 'an unbuilt dashboard is empty');
});

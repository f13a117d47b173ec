import t, { type Test } from 'tap';
import { startNode } from '../fixtures/child.ts';

/** `npm start` as it is: runtime/main.ts, configured only by its environment. */
const base = { PORT: '0', HOST: '127.0.0.1', DATABASE_URL: 'memory://', LOG_LEVEL: 'warn' };

async function engineOf(t: Test, env: Record<string, string>): Promise<string> {
  const child = startNode(t, 'runtime/main.ts', { ...base, ...env });
  const [, url] = await child.line(/listening on (http:\/\/\S+)/);
  const response = await fetch(`${url}/v1`);
  t.equal(response.status, 200);
  const body = (await response.json()) as { engine: string };
  child.proc.kill('SIGTERM');
  t.same(await child.exited, { code: 0, signal: null }, 'stops cleanly on SIGTERM');
  return body.engine;
}

t.test('on the pure-Node fallback, start-up is refused unless ALLOW_UWS_FALLBACK says otherwise', async (t) => {
  const child = startNode(t, 'runtime/main.ts', { ...base, UWS_USE_FALLBACK: '1' });
  const { code, signal } = await child.exited;
  t.equal(signal, null);
  t.not(code, 0, 'exits non-zero');
  t.match(child.stderr(), /ALLOW_UWS_FALLBACK/, 'and says which setting allows it');
  t.notOk(child.lines.some((line) => /listening on/.test(line)), 'never listened');
});

t.test('ALLOW_UWS_FALLBACK=true starts on the fallback', async (t) => {
  const child = startNode(t, 'runtime/main.ts', { ...base, UWS_USE_FALLBACK: '1', ALLOW_UWS_FALLBACK: 'true' });
  const [, url] = await child.line(/listening on (http:\/\/\S+)/);
  t.ok(url, 'it listens');
  child.proc.kill('SIGTERM');
  t.same(await child.exited, { code: 0, signal: null }, 'stops cleanly on SIGTERM');
});

// The fallback of this uWS package leaves HttpRequest.getCaseSensitiveMethod and forEach, getQuery() on a
// relative URL, HttpResponse.getRemoteAddressAsText and endWithoutBody unimplemented (they throw), and
// http/server.ts calls them: the first request kills the process. Reported to the owner of http/.
t.test('on the fallback, GET /v1 answers and says uws-fallback', { todo: 'http/server.ts needs a shim for what the uWS fallback does not implement' }, async (t) => {
  t.equal(await engineOf(t, { UWS_USE_FALLBACK: '1', ALLOW_UWS_FALLBACK: 'true' }), 'uws-fallback');
});

t.test('without the flag, the native addon serves and GET /v1 says uws-native', async (t) => {
  t.equal(await engineOf(t, {}), 'uws-native');
});

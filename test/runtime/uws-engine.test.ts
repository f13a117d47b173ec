import t, { type Test } from 'tap';
import { startNode } from '../fixtures/child.ts';
import { durableStorage } from '../helpers/database.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * `npm start` as it is: app/main.ts, configured only by its environment, on a data directory of its own that
 * starts migrated (test/helpers/database.ts durableStorage: the start skips PGlite's initdb and the migrations).
 */
async function baseOf(t: Test): Promise<Record<string, string | undefined>> {
  const { dataDir, postgres } = await durableStorage(t, 'gs-uws-engine-');
  return { PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, DATABASE_URL: postgres?.url, LOG_LEVEL: 'info', ACCESS_LOG: 'false' };
}
/** The JSON log line (stdout) that says the service listens, and where. */
const LISTENING = /"url":"(http:\/\/[^"]+)".*"msg":"listening"/;

async function engineOf(t: Test, env: Record<string, string>): Promise<string> {
  const child = startNode(t, 'app/main.ts', { ...(await baseOf(t)), ...env });
  const [, url] = await child.line(LISTENING);
  const response = await fetch(`${url}/v1`);
  t.equal(response.status, 200);
  const body = (await response.json()) as { engine: string };
  child.proc.kill('SIGTERM');
  t.same(await child.exited, { code: 0, signal: null }, 'stops cleanly on SIGTERM');
  return body.engine;
}

t.test('on the pure-Node fallback, start-up is refused unless ALLOW_UWS_FALLBACK says otherwise', async (t) => {
  const child = startNode(t, 'app/main.ts', { ...(await baseOf(t)), UWS_USE_FALLBACK: '1' });
  const { code, signal } = await child.exited;
  t.equal(signal, null);
  t.not(code, 0, 'exits non-zero');
  t.match(child.stderr(), /ALLOW_UWS_FALLBACK/, 'and says which setting allows it');
  t.notOk(
    child.lines.some((line) => LISTENING.test(line)),
    'never listened',
  );
});

// The fallback of this uWS package leaves HttpRequest.getCaseSensitiveMethod and forEach, getQuery() on a
// relative URL, HttpResponse.getRemoteAddressAsText and endWithoutBody unimplemented (they throw); the
// server reads the Node request they wrap instead. UWS_USE_FALLBACK=1 makes the package load its fallback.
t.test(
  'ALLOW_UWS_FALLBACK=true starts on the fallback, and requests are served: GET /v1 says uws-fallback, errors get the envelope, bodies are read',
  async (t) => {
    const child = startNode(t, 'app/main.ts', { ...(await baseOf(t)), UWS_USE_FALLBACK: '1', ALLOW_UWS_FALLBACK: 'true' });
    const [, url] = await child.line(LISTENING);
    t.ok(url, 'it listens');

    const identity = await fetch(`${url}/v1`);
    t.equal(identity.status, 200);
    t.match(identity.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/);
    const body = (await identity.json()) as { engine: string; docs: string };
    t.equal(body.engine, 'uws-fallback');
    t.equal(body.docs, `${url}/v1/openapi.json`, 'the docs link names the real port');

    // "listening" comes before start-up recovery has finished; until then readiness answers 503 not_ready (by
    // design), so the probe is repeated until it is ready. A path confused by its query string would answer 404.
    const ready = await eventually(
      async () => {
        const response = await fetch(`${url}/health/ready?verbose=1`);
        const body = (await response.json()) as { status?: string; error?: { code: string } };
        return response.status === 503 && body.error?.code === 'not_ready' ? undefined : { status: response.status, body };
      },
      { what: 'readiness', everyMs: 50 },
    );
    t.equal(ready.status, 200, 'a query string does not confuse the path');
    t.equal(ready.body.status, 'ready');

    const missing = await fetch(`${url}/v1/nowhere`, { headers: { 'x-request-id': 'probe-42' } });
    t.equal(missing.status, 404);
    t.same(
      await missing.json(),
      { error: { code: 'not_found', message: 'No route for GET /v1/nowhere.', requestId: 'probe-42' } },
      "headers are read: the caller's request id comes back",
    );

    // A JSON body is read through the fallback's data events: a sign-up creates an account.
    const signup = await fetch(`${url}/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'fallback@example.com', password: 'a long enough password', name: 'Fallback' }),
    });
    t.equal(signup.status, 201, await signup.clone().text());
    const malformed = await fetch(`${url}/v1/auth/signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"email":' });
    t.equal(malformed.status, 400);
    t.equal(((await malformed.json()) as { error: { code: string } }).error.code, 'validation_error');

    child.proc.kill('SIGTERM');
    t.same(await child.exited, { code: 0, signal: null }, 'still alive after serving, and stops cleanly on SIGTERM');
  },
);

t.test('without the flag, the native addon serves and GET /v1 says uws-native', async (t) => {
  t.equal(await engineOf(t, {}), 'uws-native');
});

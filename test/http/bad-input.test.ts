import t, { type Test } from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { parseRaw, rawRequest } from '../helpers/raw-http.ts';
import { probeRoutes } from './probe-routes.ts';

function assertEnvelope(t: Test, body: any, code: string, requestId?: string | null): void {
  t.equal(body?.error?.code, code, `code ${code}`);
  t.type(body?.error?.message, 'string');
  t.match(body?.error?.requestId, /.+/);
  if (requestId !== undefined) t.equal(body.error.requestId, requestId, 'X-Request-Id header matches the body');
  t.same(Object.keys(body).sort(), ['error']);
}

t.test('every malformed request gets the envelope with the right code', async (t) => {
  const server = await startTestServer(t, { routes: probeRoutes(), env: { BODY_LIMIT_BYTES: '2048' } });
  const post = (body: string | Buffer | undefined, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    server.fetch('/v1/test/echo', { method: 'POST', headers, body });

  const cases: Array<[string, () => Promise<Response>, number, string, RegExp?]> = [
    ['unknown route', () => server.fetch('/v1/nothing-here'), 404, 'not_found'],
    ['wrong method', () => server.fetch('/v1', { method: 'DELETE' }), 405, 'method_not_allowed'],
    ['empty body', () => post(undefined, { 'content-type': 'application/json' }), 400, 'validation_error', /body is required/],
    ['non-JSON body', () => post('{"name": "a",'), 400, 'validation_error', /not valid JSON/],
    ['missing Content-Type', () => post(Buffer.from('{"name":"a"}'), {}), 400, 'validation_error', /Content-Type/],
    ['wrong Content-Type', () => post('{"name":"a"}', { 'content-type': 'text/plain' }), 400, 'validation_error', /Content-Type/],
    ['unknown field', () => post('{"name":"a","admin":true}'), 400, 'validation_error', /unknown field "admin"/],
    ['wrong type', () => post('{"name":"a","count":"3"}'), 400, 'validation_error', /body\.count/],
    ['missing field', () => post('{"count":3}'), 400, 'validation_error', /body\.name: is required/],
    ['JSON that is not an object', () => post('[1,2]'), 400, 'validation_error'],
    ['too long a string', () => post(JSON.stringify({ name: 'x'.repeat(51) })), 400, 'validation_error', /body\.name/],
    ['body over the limit', () => post(JSON.stringify({ name: 'x'.repeat(4096) })), 413, 'payload_too_large'],
    ['query of the wrong type', () => server.fetch('/v1/test/items/a?limit=many'), 400, 'validation_error', /query\.limit/],
    ['query out of range', () => server.fetch('/v1/test/items/a?limit=1000'), 400, 'validation_error', /query\.limit/],
    ['unknown query parameter', () => server.fetch('/v1/test/items/a?sort=x'), 400, 'validation_error', /unknown field "sort"/],
    ['invalid percent-encoding in a path parameter', () => server.fetch('/v1/test/items/%E0%A4%A'), 400, 'validation_error', /percent-encoding/],
    ['very long URL', () => server.fetch(`/v1/test/items/a?x=${'y'.repeat(9000)}`), 414, 'uri_too_long'],
    ['handler crash', () => server.fetch('/v1/test/boom'), 500, 'internal_error'],
    ['response that breaks its own schema', () => server.fetch('/v1/test/wrong-shape'), 500, 'internal_error'],
  ];
  for (const [name, send, status, code, message] of cases) {
    const response = await send();
    const text = await response.text();
    const body = JSON.parse(text);
    t.equal(response.status, status, `${name}: status`);
    assertEnvelope(t, body, code, response.headers.get('x-request-id'));
    if (message) t.match(body.error.message, message, `${name}: message`);
    t.notMatch(text, /secret internal detail|app\.ts|password-hash|at .*\(/, `${name}: no internals leak`);
  }
  t.equal((await server.fetch('/v1', { method: 'DELETE' })).headers.get('allow'), 'GET');
});

t.test('routing: parameters, literal segments before parameters, trailing slash, decoding', async (t) => {
  const server = await startTestServer(t, { routes: probeRoutes() });
  t.same((await server.json('/v1/test/items/abc?limit=5')).body, { id: 'abc', limit: 5 });
  t.same((await server.json('/v1/test/items/special')).body, { special: true });
  t.same((await server.json('/v1/test/items/a%20b%2Fc')).body, { id: 'a b/c', limit: 20 });
  t.equal((await server.json('/v1/')).status, 200);
  t.equal((await server.json('/v1/test/items/')).status, 404);
  const ok = await server.json('/v1/test/echo', {
    method: 'POST',
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: '{"name":"ü","count":2}',
  });
  t.equal(ok.status, 201);
  t.same(ok.body, { echoed: { name: 'ü', count: 2 } });
});

t.test('a failing request is logged as JSON with its request id and no leak to the client', async (t) => {
  const lines: any[] = [];
  const server = await startTestServer(t, {
    routes: probeRoutes(),
    env: { LOG_LEVEL: 'info' },
    logDestination: {
      write: (line: string) => {
        lines.push(JSON.parse(line));
      },
    },
  });
  const response = await server.fetch('/v1/test/boom');
  const requestId = response.headers.get('x-request-id');
  const body = (await response.json()) as { error: { message: string } };
  t.match(body.error.message, requestId!, 'the message tells which request id to quote');
  const logged = lines.find((line) => line.msg === 'request failed');
  t.ok(logged, 'the failure is logged');
  t.equal(logged.requestId, requestId);
  t.equal(logged.route, '/v1/test/boom');
  t.match(logged.err.message, /secret internal detail/, 'the detail is in the log, not the response');
});

t.test('a client request id is echoed when sane and replaced when not', async (t) => {
  const server = await startTestServer(t);
  t.equal((await server.fetch('/v1', { headers: { 'x-request-id': 'client-abc.123' } })).headers.get('x-request-id'), 'client-abc.123');
  const replaced = (await server.fetch('/v1', { headers: { 'x-request-id': 'bad id with spaces' } })).headers.get('x-request-id');
  t.match(replaced, /^req_/);
});

t.test('raw protocol abuse never crashes, hangs or answers 500', async (t) => {
  const server = await startTestServer(t, { routes: probeRoutes(), env: { BODY_LIMIT_BYTES: '2048' } });
  const huge = 'x'.repeat(64 * 1024);

  const longHeader = parseRaw(await rawRequest(server.port, `GET /v1 HTTP/1.1\r\nHost: a\r\nX-Long: ${huge}\r\n\r\n`));
  t.equal(longHeader.status, 431, 'very long header refused');
  t.equal(longHeader.body.error.code, 'request_header_fields_too_large');

  const lying = parseRaw(
    await rawRequest(server.port, 'POST /v1/test/echo HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 999999\r\n\r\n{"name":"a"}'),
  );
  t.equal(lying.status, 413, 'declared length over the limit is refused before reading');
  t.equal(lying.body.error.code, 'payload_too_large');

  const badLength = parseRaw(
    await rawRequest(server.port, 'POST /v1/test/echo HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 12abc\r\n\r\n{"name":"a"}'),
  );
  t.not(badLength.status, 500, `malformed Content-Length (${badLength.status})`);

  const garbage = await rawRequest(server.port, 'NOT HTTP AT ALL\r\n\r\n');
  t.notMatch(garbage, /500 Internal/, 'garbage request line');

  t.equal((await server.json('/v1')).status, 200, 'the server still answers');
});

t.test('an aborted request is not written to and does not crash the server', async (t) => {
  let release!: () => void;
  let entered!: () => void;
  const inHandler = new Promise<void>((resolve) => {
    entered = resolve;
  });
  const gate = {
    wait: () => {
      entered();
      return new Promise<void>((resolve) => {
        release = resolve;
      });
    },
  };
  const server = await startTestServer(t, { routes: probeRoutes(gate) });

  // Half a body, then the client goes away: the body read must give up, not hang the drain.
  await rawRequest(server.port, 'POST /v1/test/echo HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":', 50);
  // A whole request whose client leaves while the handler is still working.
  const pending = rawRequest(server.port, 'POST /v1/test/slow HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}', 50);
  await inHandler;
  await pending;
  release();
  await server.http.idle();
  t.equal(server.http.inFlight(), 0, 'no request is left hanging');
  t.equal((await server.json('/v1')).status, 200, 'the server still answers');
});

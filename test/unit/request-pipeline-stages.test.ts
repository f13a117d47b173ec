import t from 'tap';
import { newRequestId, requestIdOf } from '../../http/pipeline/request-id.ts';
import { InFlight } from '../../http/pipeline/in-flight.ts';
import { parseJson } from '../../http/pipeline/json.ts';
import { redactedQuery, serverOfHost, serverSpanAttributes } from '../../http/pipeline/span-attributes.ts';
import { hasBody } from '../../http/pipeline/body-reader.ts';
import { decodeParams, parseQuery } from '../../http/pipeline/request-values.ts';
import { workspaceNamed } from '../../http/pipeline/access-log.ts';
import { isApiError } from '../../http/errors.ts';

t.test('request id: a plain client id of at most 128 characters is kept; anything else gets a new id', async (t) => {
  for (const kept of ['a', 'client-abc.123', 'trace:1_2', 'A'.repeat(128)]) t.equal(requestIdOf({ 'x-request-id': kept }), kept, kept);
  for (const refused of ['', ' ', 'with space', 'a/b', 'a\nb', 'é', 'A'.repeat(129), '<script>', 'a,b']) {
    const id = requestIdOf({ 'x-request-id': refused });
    t.not(id, refused, JSON.stringify(refused));
    t.match(id, /^req_[0-9a-f]{32}$/, `${JSON.stringify(refused)} replaced by a new id`);
  }
  t.match(requestIdOf({}), /^req_[0-9a-f]{32}$/, 'none sent: a new one');
});

t.test('request id: new ids share the process prefix and never repeat', async (t) => {
  const ids = Array.from({ length: 1000 }, () => newRequestId());
  t.equal(new Set(ids).size, ids.length, 'all different');
  t.equal(new Set(ids.map((id) => id.slice(0, 24))).size, 1, 'one random prefix per process');
  const [first, second] = [BigInt(`0x${ids[0]!.slice(24)}`), BigInt(`0x${ids[1]!.slice(24)}`)];
  t.equal(second - first, 1n, 'the counter goes up by one');
});

t.test('in flight: counted from start to finish; idle() waits for the last one', async (t) => {
  const inFlight = new InFlight();
  await inFlight.idle();
  inFlight.started();
  inFlight.started();
  t.equal(inFlight.size, 2);
  let idle = false;
  const waiting = inFlight.idle().then(() => {
    idle = true;
  });
  const another = inFlight.idle();
  const { finished } = inFlight;
  finished();
  await Promise.resolve();
  t.equal(inFlight.size, 1);
  t.notOk(idle, 'not idle while one is left');
  finished();
  await Promise.all([waiting, another]);
  t.ok(idle, 'idle once none is left, every waiter woken');
  t.equal(inFlight.size, 0);
});

t.test('query redaction: values of parameters named like secrets become REDACTED, the rest is kept as sent', async (t) => {
  t.equal(redactedQuery('page=2&sort=desc'), 'page=2&sort=desc');
  t.equal(redactedQuery('token=abc&page=2'), 'token=REDACTED&page=2');
  t.equal(redactedQuery('X-Amz-Signature=f00&X-Amz-Date=1'), 'X-Amz-Signature=REDACTED&X-Amz-Date=1');
  t.equal(
    redactedQuery('api_key=k&password=p&secret=s&auth=a&credential=c&sig=x'),
    'api_key=REDACTED&password=REDACTED&secret=REDACTED&auth=REDACTED&credential=REDACTED&sig=REDACTED',
  );
  t.equal(redactedQuery('workspaceId=ws_1&next=token'), 'workspaceId=ws_1&next=token', 'a value that looks like a secret name is not a secret');
  t.equal(redactedQuery('token&page=1'), 'token&page=1', 'a name without a value has nothing to hide');
  t.equal(redactedQuery('Token=a=b'), 'Token=REDACTED', 'the whole value, = included');
});

t.test('span attributes: the Host header gives server.address and server.port; the query is redacted', async (t) => {
  t.same(serverOfHost('api.example.com'), { host: 'api.example.com', address: 'api.example.com' });
  t.same(serverOfHost('127.0.0.1:8080'), { host: '127.0.0.1:8080', address: '127.0.0.1', port: 8080 });
  t.same(serverOfHost('[::1]:3000'), { host: '[::1]:3000', address: '::1', port: 3000 });
  t.same(serverOfHost('a:b:c'), { host: 'a:b:c' }, 'not a host: nothing');
  const attributes = serverSpanAttributes({
    method: 'GET',
    path: '/v1/blobs/x',
    rawQuery: 'sig=abc&expires=9',
    headers: { host: 'localhost:4000', 'user-agent': 'curl/8' },
    headerBytes: 0,
    remoteAddress: '10.0.0.1',
  });
  t.same(attributes, {
    'http.request.method': 'GET',
    'url.scheme': 'http',
    'url.path': '/v1/blobs/x',
    'network.protocol.version': '1.1',
    'url.query': 'sig=REDACTED&expires=9',
    'server.address': 'localhost',
    'server.port': 4000,
    'client.address': '10.0.0.1',
    'user_agent.original': 'curl/8',
  });
  const bare = serverSpanAttributes({ method: 'POST', path: '/v1', rawQuery: '', headers: {}, headerBytes: 0, remoteAddress: '' });
  t.notOk('url.query' in bare || 'server.address' in bare || 'client.address' in bare || 'user_agent.original' in bare, 'absent what was not sent');
});

t.test('JSON: only JSON content types, not empty, valid', async (t) => {
  t.same(parseJson(Buffer.from('{"a":1}'), 'application/json'), { a: 1 });
  t.same(parseJson(Buffer.from('[1]'), 'application/merge-patch+json; charset=utf-8'), [1]);
  t.same(parseJson(Buffer.from('1'), 'Application/JSON ;charset=utf-8'), 1);
  const refusal = (raw: string, type: string | undefined) => {
    try {
      parseJson(Buffer.from(raw), type);
    } catch (error) {
      return isApiError(error) ? `${error.code}: ${error.message}` : String(error);
    }
    return 'accepted';
  };
  for (const type of [undefined, 'text/plain', 'application/jsonp', 'application/x-www-form-urlencoded', 'text/json'])
    t.equal(refusal('{}', type), 'validation_error: The request body must be JSON, sent with Content-Type: application/json.', String(type));
  t.equal(refusal('', 'application/json'), 'validation_error: A JSON request body is required.');
  t.equal(refusal('{"a":', 'application/json'), 'validation_error: The request body is not valid JSON.');
});

t.test('body: announced by a Content-Length other than 0 or by chunked transfer', async (t) => {
  t.ok(hasBody({ 'content-length': '5' }));
  t.ok(hasBody({ 'transfer-encoding': 'Chunked' }));
  t.notOk(hasBody({ 'content-length': '0' }));
  t.notOk(hasBody({}));
  t.notOk(hasBody({ 'transfer-encoding': 'identity' }));
});

t.test('request values: path parameters decoded, query names repeated as arrays, the workspace named', async (t) => {
  t.same(decodeParams({ id: 'a%20b', other: 'plain' }), { id: 'a b', other: 'plain' });
  t.throws(() => decodeParams({ id: '%E0%A4%A' }), { code: 'validation_error', message: 'path parameter id has invalid percent-encoding' });
  t.same(parseQuery(''), {});
  t.same(parseQuery('a=1&b=2&a=3&a=4&c=x%20y'), { a: ['1', '3', '4'], b: '2', c: 'x y' });
  t.equal(workspaceNamed({ workspaceId: 'ws_path' }, { workspaceId: 'ws_query' }, { workspaceId: 'ws_body' }), 'ws_path');
  t.equal(workspaceNamed({}, { workspaceId: 'ws_query' }, { workspaceId: 'ws_body' }), 'ws_query');
  t.equal(workspaceNamed({}, { workspaceId: ['a', 'b'] }, { workspaceId: 'ws_body' }), 'ws_body');
  t.equal(workspaceNamed({}, {}, null), undefined);
});

// The OpenAI-compatible door follows OpenAI's conventions, not these (docs/openai-compatible.md; test/openai/).
import { isOpenAiPath } from '../../http/openai-errors.ts';
import t from 'tap';
import { validate, compileErrors } from '@readme/openapi-parser';
import { startTestServer } from '../helpers/server.ts';
import { ERROR_CODES } from '../../http/errors.ts';
import { probeRoutes } from './probe-routes.ts';

t.test('GET /v1 names the service, its version, its docs and the HTTP engine', async (t) => {
  const server = await startTestServer(t);
  const { status, body, headers } = await server.json('/v1');
  t.equal(status, 200);
  t.equal(body.name, 'generation-service');
  t.match(body.version, /^\d+\.\d+\.\d+/);
  // PORT=0 and no BASE_URL: the docs link names the port the server really listens on, not :0.
  t.equal(new URL(server.config.baseUrl).port, '0');
  t.equal(body.docs, `${server.url}/v1/openapi.json`);
  t.equal((await server.fetch(new URL(body.docs).pathname)).status, 200, 'and it serves the document');
  t.equal(body.engine, 'uws-native');
  t.match(headers.get('x-request-id'), /^req_[0-9a-f]{32}$/);
  t.match(headers.get('content-type'), /^application\/json/);
});

t.test('GET /health/ready is 503 until recovery has finished, then 200', async (t) => {
  let release!: () => void;
  const recoveryGate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const server = await startTestServer(t, {
    recovery: [
      {
        name: 'held',
        run: async () => {
          await recoveryGate;
          return 0;
        },
      },
    ],
  });
  const before = await server.json('/health/ready');
  t.equal(before.status, 503);
  t.equal(before.body.error.code, 'not_ready');
  t.match(before.body.error.message, /recovery/i);
  release();
  await server.recovered;
  const after = await server.json('/health/ready');
  t.equal(after.status, 200);
  t.same(after.body, { status: 'ready', checks: { database: 'ok', recovery: 'done' }, catalog: { version: server.services.catalog.version } });
  t.match(after.body.catalog.version, /^[0-9a-f]{16}$/, 'the catalog version, a hash');
});

t.test('GET /health/ready is 503 when recovery failed, and when the database does not answer', async (t) => {
  const server = await startTestServer(t, {
    recovery: [
      {
        name: 'broken',
        run: async () => {
          throw new Error('cannot load generations');
        },
      },
    ],
  });
  await server.recovered;
  const res = await server.json('/health/ready');
  t.equal(res.status, 503);
  t.match(res.body.error.message, /Recovery failed: cannot load generations/);

  const healthy = await startTestServer(t);
  await healthy.recovered;
  t.equal((await healthy.json('/health/ready')).status, 200);
  const ping = healthy.services.db.ping;
  healthy.services.db.ping = async () => {
    throw new Error('connection refused');
  };
  const down = await healthy.json('/health/ready');
  healthy.services.db.ping = ping;
  t.equal(down.status, 503);
  t.equal(down.body.error.code, 'not_ready');
  t.match(down.body.error.message, /database/);
});

t.test('GET /v1/openapi.json is a valid OpenAPI 3.1 document of every declared route', async (t) => {
  const server = await startTestServer(t, { routes: probeRoutes() });
  const { status, body } = await server.json('/v1/openapi.json');
  t.equal(status, 200);
  t.equal(body.openapi, '3.1.0');
  const result = await validate(structuredClone(body));
  t.ok(result.valid, result.valid ? 'valid' : compileErrors(result));

  for (const route of server.http.router.routes.filter((r) => !isOpenAiPath(r.def.path))) {
    const path = route.def.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    t.ok(body.paths[path]?.[route.def.method.toLowerCase()], `${route.def.method} ${route.def.path} is documented`);
  }
  const echo = body.paths['/v1/test/echo'].post;
  t.same(echo.requestBody.content['application/json'].schema.required, ['name']);
  t.equal(echo.requestBody.content['application/json'].schema.additionalProperties, false);
  const item = body.paths['/v1/test/items/{id}'].get;
  t.same(
    item.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`),
    ['path:id', 'query:limit'],
  );
  t.same(
    body.components.schemas.ErrorEnvelope.properties.error.properties.code.anyOf.map((c: { const: string }) => c.const).sort(),
    [...ERROR_CODES].sort(),
    'the error schema lists every code of the registry',
  );
});

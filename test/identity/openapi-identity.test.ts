import t from 'tap';
import { validate, compileErrors } from '@readme/openapi-parser';
import { startTestServer } from '../helpers/server.ts';
import { isOpenAiPath } from '../../http/openai-errors.ts';

t.test('auth and API key operations are documented with their security', async (t) => {
  const server = await startTestServer(t);
  const { body } = await server.json('/v1/openapi.json');
  const result = await validate(structuredClone(body));
  t.ok(result.valid, result.valid ? 'valid' : compileErrors(result));
  t.match(body.components.securitySchemes, {
    apiKey: { type: 'http', scheme: 'bearer' },
    session: { type: 'apiKey', in: 'cookie', name: 'gs_session' },
  });
  const ops: Array<[string, string, unknown[]]> = [
    ['/v1/auth/signup', 'post', []],
    ['/v1/auth/login', 'post', []],
    ['/v1/auth/logout', 'post', [{ session: [] }]],
    ['/v1/api-keys', 'get', [{ session: [] }]],
    ['/v1/api-keys', 'post', [{ session: [] }]],
    ['/v1/api-keys/{id}', 'patch', [{ session: [] }]],
    ['/v1/api-keys/{id}', 'delete', [{ session: [] }]],
    ['/v1/api-keys/{id}/usage', 'get', [{ session: [] }]],
  ];
  for (const [path, method, security] of ops) {
    const op = body.paths[path]?.[method];
    t.ok(op, `${method} ${path} is documented`);
    t.same(op?.security, security, `${method} ${path} security`);
  }
  // A scope that grants an operation is one requirement of its own (the requirements are alternatives), `all` too;
  // a route whose handler refuses keys is for sessions only, whatever its access.
  // The OpenAI-compatible door is described by OpenAI's reference, not this document (docs/openai-compatible.md).
  for (const route of server.http.router.routes.filter((r) => !isOpenAiPath(r.def.path))) {
    const op = body.paths[route.def.path.replace(/:(\w+)/g, '{$1}')][route.def.method.toLowerCase()];
    const { access, keys } = route.def;
    const name = `${route.def.method} ${route.def.path}`;
    const scopes = typeof keys === 'object' ? keys.scopes : typeof access === 'object' ? access.scopes : undefined;
    if (access === 'public') t.same(op.security, [], `${name}: no security`);
    else if (access === 'dashboard' || keys === 'refused') t.same(op.security, [{ session: [] }], `${name}: a session only`);
    else if (scopes) t.same(op.security, [...scopes.map((scope) => ({ apiKey: [scope] })), { apiKey: ['all'] }, { session: [] }], `${name} lists its scopes`);
    else t.same(op.security, [{ apiKey: [] }, { session: [] }], `${name}: any key or a session`);
  }
  for (const [path, method] of [
    ['/v1/me', 'get'],
    ['/v1/workspaces', 'post'],
    ['/v1/invitations/accept', 'post'],
  ] as const) {
    t.same(body.paths[path][method].security, [{ session: [] }], `${method} ${path} refuses API keys, and says so`);
  }
  const created = body.paths['/v1/api-keys'].post.responses['201'].content['application/json'].schema;
  t.ok(created.properties.key, 'the creation answer carries the plaintext');
  const listed = body.paths['/v1/api-keys'].get.responses['200'].content['application/json'].schema;
  t.notOk(listed.properties.data.items.properties.key, 'the list item has no plaintext');
  t.notOk(listed.properties.data.items.properties.keyHash, 'nor the hash');
  t.same(created.properties.scopes.items.anyOf.map((s: { const: string }) => s.const).sort(), [
    'all',
    'assets.read',
    'files.write',
    'generations.read',
    'generations.write',
    'usage.read',
    'wallet.read',
    'wallet.write',
    'webhooks.manage',
  ]);
});

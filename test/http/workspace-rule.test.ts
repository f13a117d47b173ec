// The OpenAI-compatible door follows OpenAI's conventions, not these (docs/openai-compatible.md; test/openai/).
import { isOpenAiPath } from '../../http/openai-errors.ts';
import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { actsOnWorkspace } from '../../http/workspace-field.ts';
import type { RouteDef } from '../../http/route.ts';

/**
 * One workspace rule on every route (docs/api.md: requests that act on a workspace carry workspaceId in the
 * body or the query; with a key, every request must carry that workspace's id): walked over the route
 * table, then the cases that once differed from route to route.
 */
const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '30000' } });
const a = await signUp(server);
const b = await signUp(server);

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const routes = server.http.router.routes.map((r) => r.def).filter((def) => !isOpenAiPath(def.path));
const workspaceRoutes = routes.filter(actsOnWorkspace);

function fill(route: RouteDef, workspaceId: string): string {
  return route.path.replace(/:(\w+)/g, (_, name: string) => (name === 'workspaceId' ? workspaceId : `${name}_0000000000000000000000000`));
}

t.test('every route that acts on a workspace declares workspaceId in its query and, with a body method, in its body', async (t) => {
  t.ok(workspaceRoutes.length > 40, `${workspaceRoutes.length} routes act on a workspace`);
  const document = (await server.json('/v1/openapi.json')).body;
  for (const route of workspaceRoutes) {
    const where = `${route.method} ${route.path}`;
    t.ok((route.query as any)?.properties?.workspaceId, `${where}: query.workspaceId`);
    const openApiPath = route.path.replace(/:(\w+)/g, '{$1}');
    const operation = document.paths[openApiPath]?.[route.method.toLowerCase()];
    t.ok(
      operation?.parameters?.some((p: any) => p.in === 'query' && p.name === 'workspaceId'),
      `${where}: workspaceId among the documented query parameters`,
    );
    if (BODY_METHODS.has(route.method)) {
      t.ok((route.body as any)?.properties?.workspaceId, `${where}: body.workspaceId`);
      t.ok(JSON.stringify(operation?.requestBody ?? {}).includes('"workspaceId"'), `${where}: workspaceId in the documented body`);
    }
  }
  // What the rule leaves out acts on no workspace: the caller's own account, the platform-wide stop and breakers, public routes.
  const exempt = routes.filter((r) => !actsOnWorkspace(r) && r.access !== 'public').map((r) => `${r.method} ${r.path}`);
  for (const where of exempt)
    t.match(
      where,
      /^(GET|POST|PATCH|DELETE) \/v1\/(me|invitations\/accept|generations\/emergency-stop|breakers$|auth\/logout|workspaces$)/,
      `${where} is exempt`,
    );
});

t.test('walked over the route table: a key naming no workspace is refused; workspaceId in the query or in the body is accepted', async (t) => {
  for (const route of workspaceRoutes) {
    if (route.path.includes(':workspaceId')) continue; // the path names it
    const where = `${route.method} ${route.path}`;
    const path = fill(route, a.workspaceId);
    const dashboard = route.access === 'dashboard';
    const credential = dashboard ? withCookie(a.cookie) : withKey((await createKey(server, a.cookie, a.workspaceId, ['all'])).key);
    const send = (query: string, body: Record<string, unknown> | undefined) =>
      server.json(`${path}${query}`, {
        method: route.method,
        headers: credential,
        ...(body && BODY_METHODS.has(route.method) ? { body: JSON.stringify(body) } : {}),
      });

    if (!dashboard) {
      const none = await send('', BODY_METHODS.has(route.method) ? {} : undefined);
      t.equal(none.status, 403, `${where}: a key naming no workspace: 403`);
      t.equal(none.body?.error?.code, 'forbidden', `${where}: forbidden`);
      const other = await send(`?workspaceId=${b.workspaceId}`, BODY_METHODS.has(route.method) ? {} : undefined);
      t.equal(other.status, 403, `${where}: a key naming another workspace: 403`);
    }
    const inQuery = await send(`?workspaceId=${a.workspaceId}`, BODY_METHODS.has(route.method) ? {} : undefined);
    t.not(inQuery.status, 403, `${where}: workspaceId in the query is not refused (${inQuery.status})`);
    t.notMatch(inQuery.body?.error?.message ?? '', /workspaceId|workspace id|another workspace/, `${where}: nor reported missing or unknown (query)`);
    if (BODY_METHODS.has(route.method)) {
      const inBody = await send('', { workspaceId: a.workspaceId });
      t.not(inBody.status, 403, `${where}: workspaceId in the body is not refused (${inBody.status})`);
      t.notMatch(inBody.body?.error?.message ?? '', /workspaceId|workspace id|another workspace/, `${where}: nor reported missing or unknown (body)`);
    }
  }
});

async function createGeneration(server: TestServer, key: string, where: 'query' | 'body') {
  const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'rule' }, ...(where === 'body' ? { workspaceId: a.workspaceId } : {}) };
  return server.json(`/v1/generations${where === 'query' ? `?workspaceId=${a.workspaceId}` : ''}`, {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify(body),
  });
}

t.test('the cases that once differed between routes', async (t) => {
  const { key } = await createKey(server, a.cookie, a.workspaceId, ['all']);

  const viaQuery = await createGeneration(server, key, 'query');
  t.equal(viaQuery.status, 201, 'POST /v1/generations with workspaceId in the query only: 201');
  t.equal(viaQuery.body.workspaceId, a.workspaceId, 'in the named workspace');
  const viaBody = await createGeneration(server, key, 'body');
  t.equal(viaBody.status, 201, 'and in the body: 201');

  const cancel = await server.json(`/v1/generations/${viaBody.body.id}/cancel`, {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({ workspaceId: a.workspaceId }),
  });
  t.equal(cancel.status, 200, 'POST …/cancel with workspaceId in the JSON body: 200');
  t.equal(cancel.body.status, 'cancelled');
  const cancelOther = await server.json(`/v1/generations/${viaQuery.body.id}/cancel`, {
    method: 'POST',
    headers: withCookie(b.cookie),
    body: JSON.stringify({ workspaceId: b.workspaceId }),
  });
  t.equal(cancelOther.status, 404, "another workspace's generation named with the caller's own workspace: 404, as a missing one");

  const listNone = await server.json('/v1/generations', { headers: withKey(key) });
  t.equal(listNone.status, 403, 'GET /v1/generations with a key and no workspaceId: 403, as GET /v1/assets');
  t.equal((await server.json('/v1/assets', { headers: withKey(key) })).status, 403, 'GET /v1/assets likewise');
  t.equal((await server.json(`/v1/generations?workspaceId=${a.workspaceId}`, { headers: withKey(key) })).status, 200, 'with it: 200');
  t.equal(
    (await server.json(`/v1/generations/${viaQuery.body.id}`, { headers: withKey(key) })).status,
    403,
    'GET /v1/generations/:id with a key and no workspaceId: 403',
  );
  t.equal((await server.json(`/v1/models`, { headers: withKey(key) })).status, 403, 'GET /v1/models with a key and no workspaceId: 403');

  const keyRow = await createKey(server, a.cookie, a.workspaceId, ['generations.read']);
  const patch = await server.json(`/v1/api-keys/${keyRow.id}`, {
    method: 'PATCH',
    headers: withCookie(a.cookie),
    body: JSON.stringify({ workspaceId: a.workspaceId, name: 'renamed' }),
  });
  t.equal(patch.status, 200, 'PATCH /v1/api-keys/:id with workspaceId in the body: 200');
  t.equal(patch.body.name, 'renamed');
  const usage = await server.json(`/v1/api-keys/${keyRow.id}/usage?workspaceId=${a.workspaceId}`, { headers: withCookie(a.cookie) });
  t.equal(usage.status, 200, 'GET /v1/api-keys/:id/usage with workspaceId in the query: 200');
  const wrongWorkspace = await server.json(`/v1/api-keys/${keyRow.id}/usage?workspaceId=${b.workspaceId}`, { headers: withCookie(a.cookie) });
  t.equal(wrongWorkspace.status, 404, 'a key named with another workspace than its own: 404, as a missing one');
  const deleted = await server.json(`/v1/api-keys/${keyRow.id}`, {
    method: 'DELETE',
    headers: withCookie(a.cookie),
    body: JSON.stringify({ workspaceId: a.workspaceId }),
  });
  t.equal(deleted.status, 200, 'DELETE /v1/api-keys/:id with workspaceId in the body: 200');

  const twoNames = await server.json(`/v1/workspaces/${a.workspaceId}?workspaceId=${b.workspaceId}`, { headers: withCookie(a.cookie) });
  t.equal(twoNames.status, 400, 'a session naming two different workspaces (path and query): 400');
  t.equal(twoNames.body.error.code, 'validation_error');
  const keyTwoNames = await server.json(`/v1/workspaces/${a.workspaceId}/credits?workspaceId=${b.workspaceId}`, { headers: withKey(key) });
  t.equal(keyTwoNames.status, 403, 'a key naming another workspace besides its own: 403');
});

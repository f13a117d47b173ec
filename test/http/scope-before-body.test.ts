// The OpenAI-compatible door follows OpenAI's conventions, not these (docs/openai-compatible.md; test/openai/).
import { isOpenAiPath } from '../../http/openai-errors.ts';
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { SCOPES, type RouteDef, type Scope } from '../../http/route.ts';

/**
 * The scopes a key needs on a route, or 'none' when no key may call it (dashboard routes, `keys: 'refused'`);
 * undefined when any key of the workspace may.
 */
function keyNeeds(route: RouteDef): Scope[] | 'none' | undefined {
  if (route.access === 'dashboard' || route.keys === 'refused') return 'none';
  if (typeof route.keys === 'object') return route.keys.scopes;
  if (typeof route.access === 'object') return route.access.scopes;
  return undefined;
}

/**
 * Over the whole route table: a key without what a route asks of keys gets 403 before its body is validated,
 * so it learns nothing of the body's rules. The body sent is invalid (an unknown field, the required ones
 * missing), which a caller the route admits is told (400, the control), so the 403 comes first and not instead.
 */
t.test("a key without the route's scope gets 403 before the body is validated, on every keyed route with a body", async (t) => {
  const server = await startTestServer(t);
  const a = await signUp(server);
  const routes = server.http.router.routes.map((r) => r.def).filter((def) => def.body !== undefined && keyNeeds(def) !== undefined && !isOpenAiPath(def.path));
  t.ok(
    routes.some((def) => def.path === '/v1/billing/checkout'),
    'the route table has the billing checkout, whose handler checks its scope',
  );
  t.ok(routes.length >= 10, `${routes.length} routes with a body that ask something of keys`);

  for (const route of routes) {
    await t.test(`${route.method} ${route.path}`, async (t) => {
      const needs = keyNeeds(route)!;
      const path = route.path.replace(/:(\w+)/g, (_, name: string) => (name === 'workspaceId' ? a.workspaceId : `${name}_0000000000000000000000000`));
      const body = JSON.stringify({ workspaceId: a.workspaceId, unknownFieldOfThisTest: true });
      const send = (headers: Record<string, string>) => server.json(path, { method: route.method, headers, body });

      // A key of the caller's own workspace, holding a scope the route does not take (or every scope, where no key may call).
      const wrong: Scope[] =
        needs === 'none' ? ['all'] : [SCOPES.find((s) => s !== 'all' && !needs.includes(s) && !(s === 'usage.read' && needs.includes('wallet.read')))!];
      const refused = await send(withKey((await createKey(server, a.cookie, a.workspaceId, wrong)).key));
      t.equal(refused.status, 403, `a key with ${wrong.join(', ')}: 403 (got ${refused.status})`);
      t.equal(refused.body?.error?.code, 'forbidden');
      t.notMatch(refused.body?.error?.message ?? '', /body|field/, 'and nothing about the body');

      // The control: a caller the route admits is told the body is invalid.
      const admitted =
        needs === 'none' ? await send(withCookie(a.cookie)) : await send(withKey((await createKey(server, a.cookie, a.workspaceId, [needs[0]!])).key));
      t.equal(admitted.status, 400, `control: ${needs === 'none' ? 'the signed-in owner' : `a key with ${needs[0]}`} gets 400 for the same body`);
      t.equal(admitted.body?.error?.code, 'validation_error');
      t.match(admitted.body?.error?.message ?? '', /body/, 'about the body');
    });
  }
});

import t from 'tap';
import { Type } from '@sinclair/typebox';
import { Router } from '../../http/router.ts';
import { defineRoute, type Method } from '../../http/route.ts';

function route(method: Method, path: string) {
  return defineRoute({
    method,
    path,
    operationId: `${method}${path}`,
    summary: '',
    tags: [],
    access: 'public',
    responses: { 200: Type.Object({}) },
    handler: () => ({}),
  });
}

t.test('static, parameterised and literal-before-parameter matches', async (t) => {
  const router = new Router();
  router.add(route('GET', '/v1/generations'));
  router.add(route('GET', '/v1/generations/:id'));
  router.add(route('GET', '/v1/generations/emergency-stop'));
  router.add(route('POST', '/v1/generations/:id/cancel'));
  router.add(route('DELETE', '/v1/workspaces/:workspaceId/members/:userId'));

  const list = router.match('GET', '/v1/generations');
  t.equal(list.kind === 'found' && list.route.def.path, '/v1/generations');
  const one = router.match('GET', '/v1/generations/gen_1');
  t.same(one.kind === 'found' && one.params, { id: 'gen_1' });
  const stop = router.match('GET', '/v1/generations/emergency-stop');
  t.equal(stop.kind === 'found' && stop.route.def.path, '/v1/generations/emergency-stop');
  const two = router.match('DELETE', '/v1/workspaces/ws_1/members/usr_2');
  t.same(two.kind === 'found' && two.params, { workspaceId: 'ws_1', userId: 'usr_2' });
  t.equal(router.match('GET', '/v1/generations/').kind, 'found', 'a trailing slash is ignored');
  t.equal(router.match('GET', '/v1/generations//cancel').kind, 'not_found', 'an empty parameter does not match');
  t.equal(router.match('GET', '/v1/nothing').kind, 'not_found');
});

t.test('405 lists the methods the path allows', async (t) => {
  const router = new Router();
  router.add(route('GET', '/v1/webhooks'));
  router.add(route('POST', '/v1/webhooks'));
  router.add(route('PATCH', '/v1/webhooks/:id'));
  router.add(route('DELETE', '/v1/webhooks/:id'));
  t.same(router.match('PUT', '/v1/webhooks'), { kind: 'method_not_allowed', allowed: ['GET', 'POST'] });
  const other = router.match('GET', '/v1/webhooks/whk_1');
  t.equal(other.kind, 'method_not_allowed');
  t.same(other.kind === 'method_not_allowed' && other.allowed.sort(), ['DELETE', 'PATCH']);
});

t.test('a duplicate route is refused at registration', async (t) => {
  const router = new Router();
  router.add(route('GET', '/v1/x/:id'));
  t.throws(() => router.add(route('GET', '/v1/x/:id')), /duplicate route/);
  t.throws(() => router.add(route('GET', 'v1/x')), /must start with/);
});

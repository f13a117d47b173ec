import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { authMatrix } from '../helpers/identity.ts';

// Every non-public route of the route table, so a new route is covered by being declared.
t.test('auth matrix over every route of the route table', async (t) => {
  const server = await startTestServer(t);
  const routes = server.http.router.routes.filter((r) => r.def.access !== 'public');
  t.ok(routes.length >= 5, `${routes.length} non-public routes`);
  await authMatrix(t, server);
});

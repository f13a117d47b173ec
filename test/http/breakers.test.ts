import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { authMatrix, createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { PROVIDER_ERROR_CODES } from '../../providers/adapter.ts';
import { providerCatalogFile } from '../helpers/provider-catalog.ts';

const down = { ok: false as const, errorCode: PROVIDER_ERROR_CODES.unavailable };

/** The Prometheus samples of `name` (labels as a string), from the server's scrape endpoint. */
async function samples(server: TestServer, name: string): Promise<Array<{ labels: string; value: number }>> {
  const text = await (await fetch(server.metricsUrl!)).text();
  return text.split('\n').flatMap((line) => {
    const match = new RegExp(`^${name}\\{(.*)\\} (\\S+)$`).exec(line);
    return match ? [{ labels: match[1]!, value: Number(match[2]) }] : [];
  });
}

t.test('GET /v1/breakers: every deployment of the catalog, as the shared store holds it', async (t) => {
  const clock = new ManualClock();
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server);
  const narrow = await createKey(server, owner.cookie, owner.workspaceId, ['files.write']);
  const deployments = server.services.catalog.deployments();
  t.ok(deployments.length >= 2, `${deployments.length} deployments in the shipped catalog`);
  const [first, second] = deployments as [(typeof deployments)[0], (typeof deployments)[0]];
  t.equal(server.services.breakers.kind, process.env.TEST_REDIS_URL ? 'redis' : 'memory', 'Redis when the service has one');

  for (const headers of [withKey(narrow.key), withCookie(owner.cookie)]) {
    const res = await server.json('/v1/breakers', { headers });
    t.equal(res.status, 200, 'any valid key, whatever its scopes, or a session; no workspace named');
    t.equal(res.headers.get('cache-control'), 'no-store');
    t.same(
      res.body.breakers.map((b: { deploymentId: string }) => b.deploymentId),
      deployments.map((d) => d.id),
      "every deployment, in the catalog's order",
    );
    t.same(res.body.breakers[0], {
      deploymentId: first.id,
      modelId: first.modelId,
      provider: first.provider,
      state: 'closed',
      calls: 0,
      failures: 0,
      failureRatio: 0,
      openUntil: null,
      cooldownMs: 0,
      probing: false,
      openedWith: null,
    });
    t.equal(res.body.at, new Date(clock.now()).toISOString());
  }
  const anonymous = await server.json('/v1/breakers');
  t.equal(anonymous.status, 401);
  t.equal(anonymous.body.error.code, 'unauthenticated');

  // The first deployment fails ten times in a row (the default minimum): it opens for 30 s.
  for (let i = 0; i < 10; i++) await server.services.breakers.record(first.id, down);
  await server.services.breakers.record(second.id, { ok: true });
  await server.services.breakers.record(second.id, down);
  let res = await server.json('/v1/breakers', { headers: withKey(narrow.key) });
  t.match(res.body.breakers[0], { state: 'open', calls: 0, openUntil: new Date(clock.now() + 30_000).toISOString(), cooldownMs: 30_000, probing: false });
  t.same(
    res.body.breakers[0].openedWith,
    { at: new Date(clock.now()).toISOString(), calls: 10, failures: 10, failureRatio: 1, reason: 'failures' },
    'the figures that opened it are kept, though its window was emptied',
  );
  t.equal(res.body.breakers[1].openedWith, null, 'a closed one has none');
  t.match(res.body.breakers[1], { deploymentId: second.id, state: 'closed', calls: 2, failures: 1, failureRatio: 0.5 });
  t.same(await server.services.breakers.admit(first.id), { allowed: false, status: 'open', retryAt: clock.now() + 30_000 });

  clock.advance(30_000);
  res = await server.json('/v1/breakers', { headers: withKey(narrow.key) });
  t.match(res.body.breakers[0], { state: 'half_open', openUntil: null, probing: false }, 'past its cool-down: waiting for a job');
  t.match(res.body.breakers[0].openedWith, { calls: 10, reason: 'failures' }, 'still said while half-open');
  const probe = await server.services.breakers.admit(first.id);
  t.ok(probe.allowed);
  res = await server.json('/v1/breakers', { headers: withKey(narrow.key) });
  t.match(res.body.breakers[0], { state: 'half_open', probing: true });

  // The metrics: the gauge reads every deployment, the counter holds the transitions made.
  t.ok(server.metricsUrl, 'metrics are served');
  const state = await samples(server, 'gs_breaker_state');
  t.same(state.find((s) => s.labels.includes(`gs_deployment="${first.id}"`))?.value, 1, 'half-open is 1');
  t.same(state.find((s) => s.labels.includes(`gs_deployment="${second.id}"`))?.value, 0, 'closed is 0');
  t.equal(state.length, deployments.length, 'one series per deployment');
  await server.services.breakers.record(first.id, down, (probe as { ticket: string }).ticket);
  t.same((await samples(server, 'gs_breaker_state')).find((s) => s.labels.includes(`gs_deployment="${first.id}"`))?.value, 2, 'open again is 2');
  const transitions = await samples(server, 'gs_breaker_transitions_total');
  const count = (from: string, to: string) =>
    transitions.find(
      (s) => s.labels.includes(`gs_deployment="${first.id}"`) && s.labels.includes(`gs_breaker_from="${from}"`) && s.labels.includes(`gs_breaker_to="${to}"`),
    )?.value;
  t.equal(count('closed', 'open'), 1);
  t.equal(count('open', 'half_open'), 1);
  t.equal(count('half_open', 'open'), 1);
});

t.test('GET /v1/breakers: the store out of reach is 503, and the route passes the auth matrix', async (t) => {
  const server = await startTestServer(t);
  await authMatrix(t, server, (route) => route.path === '/v1/breakers');
  const owner = await signUp(server);
  const breakers = server.services.breakers;
  const read = breakers.read;
  breakers.read = async () => {
    throw new Error('connection lost');
  };
  t.teardown(() => {
    breakers.read = read;
  });
  const res = await server.json('/v1/breakers', { headers: withCookie(owner.cookie) });
  t.equal(res.status, 503);
  t.equal(res.body.error.code, 'service_unavailable');
  t.equal(res.headers.get('retry-after'), '2');
});

t.test('GET /v1/breakers: a deployment whose provider kind is not configured here reads unconfigured', async (t) => {
  const catalogFile = providerCatalogFile(t, [
    {
      id: 'acme/painter',
      mode: 'text_to_image',
      credits: 3,
      parameters: { prompt: { required: true } },
      deployment: { id: 'painter-cog', provider: 'cog', target: {}, optional: true },
    },
  ]);
  // No COG_BASE_URL: the cog kind is not configured on this service.
  const server = await startTestServer(t, { env: { CATALOG_FILE: catalogFile } });
  const owner = await signUp(server);
  const res = await server.json('/v1/breakers', { headers: withCookie(owner.cookie) });
  t.equal(res.status, 200);
  const painter = res.body.breakers.find((b: { deploymentId: string }) => b.deploymentId === 'painter-cog');
  t.match(painter, { provider: 'cog', state: 'unconfigured', calls: 0 }, 'not closed: no job can go there');
  t.notOk(
    res.body.breakers.some((b: { provider: string; state: string }) => b.provider !== 'cog' && b.state === 'unconfigured'),
    'configured kinds read their breaker',
  );
});

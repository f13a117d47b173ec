import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { STARTING_CREDITS, writeTestCatalog } from '../helpers/provider-service.ts';
import { PROVIDER_ERROR_CODES } from '../../providers/adapter.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from '../generations/flow.ts';

/**
 * A job whose every deployment has an open breaker waits (with its slot) for a cool-down to end, but no longer
 * than PROVIDER_BREAKER_WAIT_MS: then it fails with provider_unavailable and its credits are released, though
 * the breaker's cool-down (two minutes here) and the job's deadline are far off.
 */
const catalogFile = writeTestCatalog(t, [
  {
    id: 'acme/guarded',
    mode: 'text_to_image',
    price: { per: 'job', credits: 5 },
    parameters: { prompt: { required: true } },
    deployments: [{ id: 'guarded-local', provider: 'local', breaker: { cooldownMs: 120_000, maxCooldownMs: 120_000 } }],
  },
]);
const server = await startTestServer(t, { env: { CATALOG_FILE: catalogFile, PROVIDER_BREAKER_WAIT_MS: '1500' } });
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);

t.test('a job behind an open breaker gives up after PROVIDER_BREAKER_WAIT_MS with provider_unavailable, and its credits are released', async (t) => {
  for (let i = 0; i < 10; i++) await server.services.breakers.record('guarded-local', { ok: false, errorCode: PROVIDER_ERROR_CODES.unavailable });
  t.match((await server.services.breakers.read(['guarded-local']))[0], { status: 'open' });
  const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_image', model: 'acme/guarded', params: { prompt: 'waits' } });
  t.equal(created.status, 201, JSON.stringify(created.body));
  // While it waits, its timeline says what for: which deployment, why, until when it waits at most.
  const waiting = await waitFor(
    server,
    key,
    user.workspaceId,
    created.body.id,
    (g) => isTerminal(g) || g.timeline.some((e) => e.detail?.startsWith('waiting for ')),
    'a note of the wait',
  );
  t.equal(waiting.status, 'reserved', 'noted while it waits, before its hand-over');
  const note = waiting.timeline.find((e) => e.detail?.startsWith('waiting for '));
  t.match(note?.detail, /^waiting for guarded-local: its circuit breaker is open until about \S+; giving up at \S+$/);
  const g = await waitFor(server, key, user.workspaceId, created.body.id, isTerminal, 'a terminal state');
  t.equal(g.timeline.filter((e) => e.detail?.startsWith('waiting for ')).length, 1, 'said once');
  t.match(g, { status: 'failed', errorCode: 'provider_unavailable', errorMessage: /circuit breaker open.*PROVIDER_BREAKER_WAIT_MS/ });
  t.match((await server.services.breakers.read(['guarded-local']))[0], { status: 'open' }, 'the breaker is still open: the wait ended it, not a cool-down');
  const money = await moneyOf(serverQuery(server), user.workspaceId);
  t.equal(money.available, STARTING_CREDITS, 'nothing charged');
  t.equal(money.reserved, 0);
  t.same((await ledgerByGeneration(serverQuery(server), user.workspaceId))[created.body.id], { reserve: 1, release: 1 });
});

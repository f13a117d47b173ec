import t, { type Test } from 'tap';
import pg from 'pg';
import { ManualClock } from '../../runtime/clock.ts';
import { newId } from '../../persistence/ids.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { cancelGeneration, createEndpoint, createGeneration, eventually, historyWhen, startReceiver, tenant } from './support.ts';

/**
 * An endpoint whose creation commits while a generation's end is being written gets that event: the
 * settlement waits for the creation's workspace lock before it reads the subscribed endpoints. Only
 * PostgreSQL has concurrent transactions; PGlite runs one at a time, where the race cannot happen.
 */
const ONLY_POSTGRES = { skip: process.env.TEST_DATABASE_URL ? false : 'PostgreSQL only (TEST_DATABASE_URL): PGlite runs one transaction at a time' };

/** Opens a transaction that does what POST /v1/webhooks does (the workspace lock, the insert) and holds it before its commit. */
async function heldCreation(t: Test, server: TestServer, workspaceId: string, url: string, eventTypes: string[], now: number) {
  const creation = new pg.Client({ connectionString: server.config.databaseUrl });
  await creation.connect();
  t.teardown(() => creation.end());
  const id = newId('whk', now);
  const at = new Date(now);
  await creation.query('begin');
  await creation.query('select id from workspaces where id = $1 for update', [workspaceId]);
  await creation.query(
    `insert into webhook_endpoints (id, workspace_id, url, description, event_types, status, secret_sealed, created_at, updated_at)
     values ($1, $2, $3, null, $4, 'active', $5, $6, $6)`,
    [id, workspaceId, url, JSON.stringify(eventTypes), server.services.webhookSecrets.seal('whsec_race', id), at],
  );
  return { id, commit: () => creation.query('commit') };
}

/** Resolves once a transaction of the test database waits on a lock (the event's, on the creation's). */
async function someoneWaits(t: Test, server: TestServer): Promise<void> {
  const monitor = new pg.Client({ connectionString: server.config.databaseUrl });
  await monitor.connect();
  t.teardown(() => monitor.end());
  await eventually(async () => {
    const { rows } = await monitor.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`);
    return rows[0].n > 0 ? true : undefined;
  }, 'the event waits for the endpoint creation');
}

t.test('an endpoint created as an endpoint disables itself gets the webhook_endpoint.disabled event', ONLY_POSTGRES, async (t) => {
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, { clock, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const who = await tenant(server);
  const dead = await startReceiver(t);
  dead.behave(() => ({ status: 500 }));
  const watcher = await startReceiver(t);
  const failing = await createEndpoint(server, who, dead.url, ['generation.cancelled']);
  const generation = await createGeneration(server, who);
  await cancelGeneration(server, who, generation.id);
  await historyWhen(server, who, failing.id, (d) => d[0]?.attempts.length === 1, 'the first attempt failed');

  const created = await heldCreation(t, server, who.workspaceId, watcher.url, ['webhook_endpoint.disabled'], clock.now());
  clock.advance(5 * 86_400_000);
  // The disabling transaction reads the subscribers only once the creation is decided.
  await someoneWaits(t, server);
  await created.commit();
  const [notice] = await watcher.waitFor(1);
  t.match(notice!.body, { event: 'webhook_endpoint.disabled', data: { endpointId: failing.id } });
});

// The generation's settlement also inserts its ledger entry, whose foreign key waits on the creation's lock
// too; the explicit lock keeps the rule whatever the money write does.
t.test('an endpoint created as a generation finishes gets its event', ONLY_POSTGRES, async (t) => {
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, { clock, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const who = await tenant(server);
  const receiver = await startReceiver(t);
  const generation = await createGeneration(server, who);

  const { id, commit } = await heldCreation(t, server, who.workspaceId, receiver.url, ['generation.cancelled'], clock.now());
  const cancelled = cancelGeneration(server, who, generation.id);
  // The settlement waits on the creation's lock, then sees the endpoint in both its statements.
  await someoneWaits(t, server);
  await commit();
  await cancelled;

  const [delivered] = await historyWhen(server, who, id, (d) => d[0]?.status === 'delivered', 'the new endpoint got the event');
  t.equal(delivered.generationId, generation.id);
  const [got] = await receiver.waitFor(1);
  t.equal(got!.body.data.generationId, generation.id);
});

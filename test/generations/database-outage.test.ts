import t from 'tap';
import pg from 'pg';
import { createKey, signUp } from '../helpers/identity.ts';
import { startTestServer } from '../helpers/server.ts';
import { createOwnedPostgres, findPostgresBin } from '../helpers/owned-postgres.ts';
import { createGeneration, moneyOf, TERMINAL } from './flow.ts';
import { setPlan } from './support.ts';
import { createEndpoint, startReceiver } from '../webhooks/support.ts';

/**
 * PostgreSQL stops under load and comes back, while the service keeps running: requests meanwhile answer
 * 503 service_unavailable, and afterwards every acknowledged job settles (no restart), its outputs kept and
 * its credits captured once, with nothing left reserved. The test owns its PostgreSQL server (a cluster of
 * its own on a free port), so it runs in the PostgreSQL pass of the suite only (TEST_DATABASE_URL set): the
 * PGlite pass would run the very same test again.
 */
const bin = await findPostgresBin();
if (!process.env.TEST_DATABASE_URL) {
  t.plan(0, 'runs in the PostgreSQL pass of the suite (TEST_DATABASE_URL set) only');
} else if (!bin) {
  t.plan(0, 'no PostgreSQL server binaries (initdb, pg_ctl) on this machine: set PG_BIN');
} else {
  t.test('a database outage under load: 503 while it lasts, every job settles after it without a restart', async (t) => {
    const postgres = await createOwnedPostgres(t, bin);
    // The service's warnings and errors are kept, to be shown if a job is left unfinished.
    const logLines: string[] = [];
    const server = await startTestServer(t, {
      databaseUrl: postgres.url,
      env: { LOCAL_PROVIDER_LATENCY_MS: '1500', ALLOW_PRIVATE_EGRESS: 'true', LOG_LEVEL: process.env.OUTAGE_LOG_LEVEL ?? 'warn' },
      logDestination: {
        write: (line: string) => {
          logLines.push(line);
        },
      },
    });
    const direct = async <R>(sql: string, params: unknown[] = []): Promise<R[]> => {
      const client = new pg.Client({ connectionString: postgres.url });
      await client.connect();
      try {
        // pg numbers its parameters; the money helpers write `?`.
        let n = 0;
        return (
          await client.query(
            sql.replace(/\?/g, () => `$${++n}`),
            params,
          )
        ).rows as R[];
      } finally {
        await client.end();
      }
    };

    const user = await signUp(server);
    await setPlan(server, user.workspaceId, 'team');
    const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read', 'webhooks.manage']);
    // Every job's end is a webhook delivery: written with the settlement, sent, and its outcome recorded.
    const receiver = await startReceiver(t);
    await createEndpoint(server, { ...user, key }, receiver.url, ['generation.completed', 'generation.failed']);

    // Load: a few clients creating jobs all along, one in four an image (its output file goes to the blob store).
    const acknowledged: string[] = [];
    const unavailable: Array<{ retryAfter: string | null }> = [];
    const unexpected: Array<{ status: number; body: unknown }> = [];
    let loading = true;
    let sent = 0;
    const client = async () => {
      while (loading) {
        const image = sent++ % 4 === 3;
        const created = await createGeneration(
          server,
          key,
          user.workspaceId,
          image
            ? { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: `job ${sent}`, numImages: 1 } }
            : { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${sent}` } },
        );
        if (created.status === 201) acknowledged.push(created.body.id);
        else if (created.status === 503 && (created.body as { error?: { code?: string } }).error?.code === 'service_unavailable')
          unavailable.push({ retryAfter: created.headers.get('retry-after') });
        else unexpected.push({ status: created.status, body: created.body });
        await new Promise((resolve) => setTimeout(resolve, 60));
      }
    };
    const clients = Array.from({ length: 4 }, () => client());

    // Wait until jobs are in flight at every stage, then stop the server the hard way.
    const inFlightNow = async () =>
      (await direct<{ n: string }>(`select count(*) as n from generations where status in ('reserved', 'submitted', 'running')`))[0]!.n;
    for (let i = 0; i < 200 && Number(await inFlightNow()) < 30; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    const snapshot = await direct<{ id: string; status: string }>('select id, status from generations');
    const before: Record<string, number> = {};
    for (const row of snapshot) before[row.status] = (before[row.status] ?? 0) + 1;
    const inFlightIds = snapshot.filter((r) => ['reserved', 'submitted', 'running'].includes(r.status)).map((r) => r.id);
    const inFlight = inFlightIds.length;
    t.ok(inFlight > 0, `jobs in flight when the database stops: ${JSON.stringify(before)}`);
    await postgres.stop('immediate');
    const stoppedAt = Date.now();

    // While it is down: requests that need the database answer 503 with Retry-After; readiness says not ready.
    // (The load's creates sent just before the stop wait for their commit: they are answered once it is back.)
    let sawReadyDown = false;
    const refused = { reads: 0, creates: 0 };
    while (Date.now() - stoppedAt < 4_000) {
      const ready = await server.json('/health/ready');
      if (ready.status === 503 && ready.body.error.code === 'not_ready') sawReadyDown = true;
      const read = await server.json(`/v1/generations/${acknowledged[0]}?workspaceId=${user.workspaceId}`, { headers: { authorization: `Bearer ${key}` } });
      const create = await createGeneration(server, key, user.workspaceId, {
        mode: 'text_to_text',
        model: 'local/text-mini',
        params: { prompt: 'during the outage' },
      });
      for (const [kind, answer] of [
        ['reads', read],
        ['creates', create],
      ] as const) {
        if (answer.status === 503) {
          t.equal((answer.body as { error: { code: string } }).error.code, 'service_unavailable', `${kind}: 503 service_unavailable`);
          t.ok(Number(answer.headers.get('retry-after')) > 0, `${kind}: with Retry-After`);
          refused[kind]++;
        } else if (answer.status === 201) {
          acknowledged.push((answer.body as { id: string }).id);
        } else if (answer.status !== 200) {
          unexpected.push({ status: answer.status, body: answer.body });
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    t.ok(sawReadyDown, 'readiness answered 503 not_ready during the outage');
    t.ok(refused.reads > 0, `reads answered 503 service_unavailable during the outage: ${refused.reads}`);
    t.ok(refused.creates > 0, `creates answered 503 service_unavailable during the outage: ${refused.creates}`);
    await postgres.start();
    const restartedAt = Date.now();
    // A little more load once it is back, then the load stops.
    await new Promise((resolve) => setTimeout(resolve, 500));
    loading = false;
    await Promise.all(clients);
    t.same(unexpected, [], 'no answer other than 201 or 503 service_unavailable');
    t.ok(
      unavailable.every((answer) => Number(answer.retryAfter) > 0),
      `every 503 of the load (${unavailable.length}) carries Retry-After`,
    );

    // Every job settles, with no restart of the service.
    let open = -1;
    let settledAt = 0;
    let inFlightSettledAt = 0;
    for (let i = 0; i < 600; i++) {
      if (inFlightSettledAt === 0) {
        const left = Number(
          (await direct<{ n: string }>('select count(*) as n from generations where id = any($1) and status <> all($2)', [inFlightIds, TERMINAL]))[0]!.n,
        );
        if (left === 0) inFlightSettledAt = Date.now();
      }
      open = Number((await direct<{ n: string }>('select count(*) as n from generations where status <> all($1)', [TERMINAL]))[0]!.n);
      if (open === 0) {
        settledAt = Date.now();
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // If any is left, the failure carries what would explain it: those jobs and the service's last warnings.
    const unfinished =
      open === 0
        ? []
        : await direct<{ id: string; status: string; attempts: number; timeline: unknown }>(
            'select id, status, attempts, timeline from generations where status <> all($1)',
            [TERMINAL],
          );
    t.equal(open, 0, 'no job left unfinished', open === 0 ? {} : { unfinished, serviceLog: logLines.slice(-60) });
    // Jobs whose provider finished while the database was down (submitted more than the provider's latency
    // before it came back): their results waited in their actors and were committed once it was back.
    const timelines = await direct<{ timeline: Array<{ status: string; at: string }> }>('select timeline from generations where id = any($1)', [inFlightIds]);
    const finishedDuringOutage = timelines.filter((g) => {
      const submitted = g.timeline.find((e) => e.status === 'submitted');
      return submitted !== undefined && Date.parse(submitted.at) + 1_500 < restartedAt;
    }).length;
    const rows = await direct<{ id: string; status: string; error_code: string | null; output_asset_ids: string[]; mode: string }>(
      'select id, status, error_code, output_asset_ids, mode from generations where workspace_id = $1',
      [user.workspaceId],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const notSucceeded = acknowledged.filter((id) => byId.get(id)?.status !== 'succeeded').map((id) => byId.get(id) ?? { id, status: 'missing' });
    t.same(notSucceeded, [], 'every acknowledged job succeeded: none lost, none failed by the outage');
    const imagesWithoutOutput = rows.filter((r) => r.mode === 'text_to_image' && r.status === 'succeeded' && r.output_asset_ids.length !== 1);
    t.same(imagesWithoutOutput, [], 'every image job kept its output');
    const money = await moneyOf(direct, user.workspaceId);
    t.equal(money.reserved, 0, 'nothing left reserved');
    t.same(money.reservations, [], 'every reservation was captured or released');
    t.equal(money.available, money.ledgerAvailable, 'balance equals the sum of the ledger');
    const doubled = await direct<{ generation_id: string; kind: string; n: string }>(
      `select generation_id, kind, count(*) as n from credit_ledger where workspace_id = $1 and generation_id is not null group by generation_id, kind having count(*) > 1`,
      [user.workspaceId],
    );
    t.same(doubled, [], 'no ledger entry written twice');
    t.equal((await server.json('/health/ready')).status, 200, 'ready again');

    // Every job's webhook delivery is delivered, none left pending, each received.
    const deliveryCount = async () =>
      direct<{ status: string; n: string }>('select status, count(*) as n from webhook_deliveries group by status order by status');
    let deliveries = await deliveryCount();
    for (let i = 0; i < 300 && !(deliveries.length === 1 && deliveries[0]!.status === 'delivered' && Number(deliveries[0]!.n) === rows.length); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      deliveries = await deliveryCount();
    }
    t.same(
      deliveries.map((d) => ({ status: d.status, n: Number(d.n) })),
      [{ status: 'delivered', n: rows.length }],
      'one delivery per job, every one delivered',
    );
    const received = new Set(receiver.received.map((r) => String(r.headers['x-service-delivery'])));
    t.equal(received.size, rows.length, 'the receiver got each of them');

    t.comment(
      `outage: ${inFlight} jobs in flight at the stop (${JSON.stringify(before)}); ${refused.reads + refused.creates + unavailable.length} requests answered 503 (${refused.reads} reads, ${refused.creates + unavailable.length} creates); ` +
        `${acknowledged.length} acknowledged; database down ${restartedAt - stoppedAt} ms; ${finishedDuringOutage} of the jobs in flight finished at the provider during the outage; ` +
        `the jobs in flight at the stop all settled ${inFlightSettledAt - restartedAt} ms after the database was back, every job ${settledAt - restartedAt} ms after`,
    );
    await server.stop();
  });
}

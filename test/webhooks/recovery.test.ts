import t from 'tap';
import { durableStorage } from '../helpers/database.ts';
import { startNode } from '../fixtures/child.ts';
import { openDatabase } from '../../persistence/database.ts';
import { verifyWebhook } from '../../client/src/webhooks.ts';
import { startReceiver } from './support.ts';
import { eventually } from '../helpers/eventually.ts';

/** The real service in a child process, on PGlite in a temp folder or a fresh Postgres database, killed with SIGKILL. */
const { dataDir, postgres } = await durableStorage(t, 'gs-webhooks-');

const env = {
  PORT: '0',
  HOST: '127.0.0.1',
  LOG_LEVEL: 'warn',
  DATA_DIR: dataDir,
  DATABASE_URL: postgres?.url,
  ALLOW_PRIVATE_EGRESS: 'true',
  // Long enough for a job to still be with the provider when the process is killed.
  LOCAL_PROVIDER_LATENCY_MS: '3000',
  // A held request stays on the wire until the kill.
  WEBHOOK_TIMEOUT_MS: '60000',
};

async function serve() {
  const child = startNode(t, 'test/fixtures/serve.ts', env);
  const url = (await child.line(/^listening (http:\/\/\S+)$/))[1]!;
  const call = async (method: string, pathname: string, body?: unknown, key?: string, cookie?: string) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (key) headers.authorization = `Bearer ${key}`;
    if (cookie) headers.cookie = cookie;
    const response = await fetch(`${url}${pathname}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
  };
  return { child, url, call };
}

const until = <T>(probe: () => Promise<T | undefined>, what: string): Promise<T> => eventually(probe, { timeoutMs: 60_000, everyMs: 50, what }) as Promise<T>;

t.test('kill -9: the attempt on the wire is sent again, a scheduled retry resumes, and a job in flight still gets its event', async (t) => {
  const inFlight = await startReceiver(t);
  const retrying = await startReceiver(t);
  inFlight.behave(() => ({ hold: true }));
  retrying.behave(() => ({ status: 500 }));

  const first = await serve();
  const signup = await first.call('POST', '/v1/auth/signup', { email: `wh-${process.pid}@example.com`, password: 'correct horse battery', name: 'W' });
  t.equal(signup.status, 201);
  const cookie = /gs_session=[^;]*/.exec(signup.headers.get('set-cookie') ?? '')![0];
  const workspaceId = signup.body.workspace.id as string;
  const key = (await first.call('POST', '/v1/api-keys', { workspaceId, name: 'k', scopes: ['all'] }, undefined, cookie)).body.key as string;
  const hook = async (url: string) =>
    (await first.call('POST', '/v1/webhooks', { workspaceId, url, eventTypes: ['generation.completed', 'generation.failed'] }, key)).body;
  const a = await hook(inFlight.url);
  const b = await hook(retrying.url);
  const history = (call: typeof first.call, id: string) =>
    call('GET', `/v1/webhooks/${id}/deliveries?workspaceId=${workspaceId}`, undefined, key).then((r) => r.body.data as any[]);

  const g1 = (await first.call('POST', '/v1/generations', { workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'one' } }, key)).body
    .id as string;
  const [held] = await inFlight.waitFor(1, 60_000);
  await retrying.waitFor(1, 60_000);
  const [scheduled] = await until(async () => {
    const data = await history(first.call, b.id);
    return data[0]?.attempts.length === 1 ? data : undefined;
  }, 'the 500 is recorded and the retry scheduled');
  t.equal(scheduled.status, 'pending');
  t.ok(Date.parse(scheduled.nextAttemptAt) >= Date.parse(scheduled.attempts[0].at) + 30_000, 'the retry is due 30 s or more later');
  const [onTheWire] = await history(first.call, a.id);
  t.match(onTheWire, { id: held!.headers['x-service-delivery'], status: 'pending', attempts: [] }, 'the held attempt is not recorded yet');

  const g2 = (await first.call('POST', '/v1/generations', { workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'two' } }, key)).body
    .id as string;
  // Killed once g2 is in flight (past queued: the provider takes LOCAL_PROVIDER_LATENCY_MS to answer).
  const inFlightAtKill = await until(async () => {
    const status = (await first.call('GET', `/v1/generations/${g2}?workspaceId=${workspaceId}`, undefined, key)).body.status as string;
    return status === 'queued' ? undefined : status;
  }, 'g2 leaves queued');
  t.ok(['reserved', 'submitted', 'running'].includes(inFlightAtKill), `g2 is in flight (${inFlightAtKill}) when the service is killed`);
  first.child.proc.kill('SIGKILL');
  t.match(await first.child.exited, { signal: 'SIGKILL' });

  // The service stayed down past the retry's due time: say so in the database, as a long outage would.
  const db = await openDatabase({ databaseUrl: postgres?.url, dataDir });
  await db.em().execute(`update webhook_deliveries set next_attempt_at = ? where id = ?`, [new Date(Date.now() - 1000), scheduled.id]);
  await db.close();

  inFlight.behave(() => ({ status: 200 }));
  retrying.behave(() => ({ status: 200 }));
  const second = await serve();

  // At least once: the attempt cut by the crash is made again, with the same delivery id and body.
  const again = (await inFlight.waitFor(2, 60_000))[1]!;
  t.equal(again.headers['x-service-delivery'], held!.headers['x-service-delivery']);
  t.equal(again.rawBody.toString(), held!.rawBody.toString());
  t.equal(verifyWebhook(again.rawBody, again.headers['x-service-signature'], a.secret).data.generationId, g1);
  await until(async () => ((await history(second.call, a.id)).find((d) => d.generationId === g1)?.status === 'delivered' ? true : undefined), 'a delivered');
  const [resent] = (await history(second.call, a.id)).filter((d) => d.generationId === g1);
  t.equal(resent.attempts.length, 1, 'the cut attempt left no record; the one after the restart is attempt 1');

  // The scheduled retry resumes: attempt 2 succeeds.
  const retried = await until(async () => {
    const d = (await history(second.call, b.id)).find((x) => x.generationId === g1);
    return d?.status === 'delivered' ? d : undefined;
  }, 'b delivered');
  t.match(retried.attempts, [
    { attemptNumber: 1, responseStatus: 500 },
    { attemptNumber: 2, responseStatus: 200 },
  ]);

  // The job in flight at the kill is handed to its provider again after the restart and completes
  // (docs/api.md: a job does not fail because the service died), and its event reaches both endpoints.
  const final = await until(async () => {
    const g = (await second.call('GET', `/v1/generations/${g2}?workspaceId=${workspaceId}`, undefined, key)).body;
    return ['succeeded', 'failed', 'cancelled', 'expired'].includes(g.status) ? g : undefined;
  }, 'g2 ends');
  t.equal(final.status, 'succeeded', `g2 ran again and succeeded: ${JSON.stringify(final)}`);
  t.ok(
    final.timeline.some((entry: { detail?: string }) => /^resubmitted after a restart \(attempt 2 of \d+\)$/.test(entry.detail ?? '')),
    'g2 was in flight at the kill and was handed to its provider again (its timeline says so)',
  );
  for (const [receiver, endpoint] of [
    [inFlight, a],
    [retrying, b],
  ] as const) {
    const delivered = await until(async () => receiver.received.find((r) => r.body.data.generationId === g2), 'g2 event');
    t.equal(delivered.body.event, 'generation.completed', `${endpoint.id} got the event of g2's end`);
    t.equal(
      verifyWebhook(delivered.rawBody, delivered.headers['x-service-signature'], endpoint.secret).data.status,
      'succeeded',
      `${endpoint.id}: the signed event says g2 succeeded`,
    );
  }

  second.child.proc.kill('SIGTERM');
  await second.child.exited;
});

import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer } from '../helpers/server.ts';
import { withKey } from '../helpers/identity.ts';
import { verifyWebhook } from '../../client/src/webhooks.ts';
import { cancelGeneration, createEndpoint, createGeneration, deliveries, eventually, getGeneration, historyWhen, startReceiver, tenant } from './support.ts';

t.test("generation.started goes only to endpoints that name it, written with the move to running, and before the job's terminal event", async (t) => {
  const clock = new ManualClock(Date.now());
  // The provider reports running after half its ten minutes of the manual clock, and finishes only when told.
  const server = await startTestServer(t, { clock, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000' } });
  const opted = await startReceiver(t);
  const plain = await startReceiver(t);
  // The started event is held on the wire until the terminal event is queued behind it.
  opted.behave((i) => (i === 0 ? { hold: true } : { status: 200 }));
  const who = await tenant(server);
  const withStarted = await createEndpoint(server, who, opted.url, ['generation.started', 'generation.cancelled']);
  const without = await createEndpoint(server, who, plain.url, ['generation.cancelled', 'generation.completed']);
  const listed = await server.json(`/v1/webhooks?workspaceId=${who.workspaceId}`, { headers: withKey(who.key) });
  t.same(listed.body.data.find((e: any) => e.id === withStarted.id).eventTypes, ['generation.started', 'generation.cancelled']);

  const generation = await createGeneration(server, who);
  await eventually(async () => ((await getGeneration(server, who, generation.id)).status === 'submitted' ? true : undefined), 'with the provider');
  t.same(await server.services.db.em().execute('select id from webhook_deliveries where generation_id = ?', [generation.id]), [], 'nothing before it runs');
  clock.advance(300_000);
  const running = await eventually(async () => {
    const g = await getGeneration(server, who, generation.id);
    return g.status === 'running' ? g : undefined;
  }, 'running');
  // Read the moment running is visible: the delivery is in the same commit.
  const rows = await server.services.db
    .em()
    .execute<Array<{ endpoint_id: string; event_type: string }>>('select endpoint_id, event_type from webhook_deliveries where generation_id = ?', [
      generation.id,
    ]);
  t.same(
    rows,
    [{ endpoint_id: withStarted.id, event_type: 'generation.started' }],
    'one delivery, to the endpoint that asked, committed with the move to running',
  );

  const [started] = await opted.waitFor(1);
  const event = verifyWebhook(started!.rawBody, started!.headers['x-service-signature'], withStarted.secret, { now: clock.now() });
  t.equal(started!.headers['x-service-event'], 'generation.started');
  t.same(Object.keys(event), ['id', 'event', 'data', 'createdAt']);
  t.same(event.data, {
    generationId: generation.id,
    workspaceId: who.workspaceId,
    mode: 'text_to_text',
    modelId: 'local/text-mini',
    status: 'running',
    outputAssetIds: [],
    credits: running.credits,
    startedAt: running.startedAt,
    completedAt: null,
  });

  await cancelGeneration(server, who, generation.id);
  const [cancelledPlain] = await plain.waitFor(1);
  t.equal(cancelledPlain!.body.event, 'generation.cancelled');
  t.equal(opted.received.length, 1, 'the terminal event waits behind the started one on its endpoint');
  opted.held[0]!.release(200);
  const [, cancelled] = await opted.waitFor(2);
  t.equal(cancelled!.body.event, 'generation.cancelled', 'started, then cancelled');
  const history = await historyWhen(server, who, withStarted.id, (d) => d.length === 2 && d.every((x) => x.status === 'delivered'), 'both delivered');
  t.same(
    history.map((d) => d.event),
    ['generation.cancelled', 'generation.started'],
    'the history lists both, newest first',
  );
  t.ok(history[1].id < history[0].id, 'the started delivery sorts first');

  t.equal(plain.received.length, 1, 'the endpoint that did not ask got exactly the terminal event, as before');
  t.same(
    (await deliveries(server, who, without.id)).data.map((d) => d.event),
    ['generation.cancelled'],
  );
});

t.test('a job that goes through running to completion: started then completed to the opted-in endpoint, completed alone to the other', async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const opted = await startReceiver(t);
  const plain = await startReceiver(t);
  const who = await tenant(server);
  const withStarted = await createEndpoint(server, who, opted.url, ['generation.completed', 'generation.started']);
  const other = await createEndpoint(server, who, plain.url);
  const jobs = [await createGeneration(server, who), await createGeneration(server, who)];
  const got = await opted.waitFor(4);
  for (const job of jobs) {
    const events = got.filter((r) => r.body.data.generationId === job.id).map((r) => r.body.event);
    t.same(events, ['generation.started', 'generation.completed'], `${job.id}: started before completed`);
  }
  for (const r of got) verifyWebhook(r.rawBody, r.headers['x-service-signature'], withStarted.secret);
  const others = await plain.waitFor(2);
  t.same(
    others.map((r) => r.body.event),
    ['generation.completed', 'generation.completed'],
  );
  // A started delivery would have been written before the completed ones, which exist: there is none.
  const rows = await server.services.db
    .em()
    .execute<Array<{ event_type: string }>>('select event_type from webhook_deliveries where endpoint_id = ? order by id', [other.id]);
  t.same(
    rows.map((r) => r.event_type),
    ['generation.completed', 'generation.completed'],
    'no started event where it was not asked for',
  );
});

t.test('an unknown event name is still refused; generation.started can be added by PATCH', async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true' } });
  const who = await tenant(server);
  const refused = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, url: 'http://127.0.0.1:9/h', eventTypes: ['generation.running'] }),
  });
  t.equal(refused.status, 400);
  const endpoint = await createEndpoint(server, who, 'http://127.0.0.1:9/h', ['generation.completed']);
  const patched = await server.json(`/v1/webhooks/${endpoint.id}`, {
    method: 'PATCH',
    headers: withKey(who.key),
    body: JSON.stringify({ workspaceId: who.workspaceId, eventTypes: ['generation.completed', 'generation.started'] }),
  });
  t.equal(patched.status, 200);
  t.same(patched.body.eventTypes, ['generation.completed', 'generation.started']);
});

import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer } from '../helpers/server.ts';
import { verifyWebhook, type WebhookVerificationError } from '../../client/src/webhooks.ts';
import { cancelGeneration, createEndpoint, createGeneration, deliveries, eventually, getGeneration, historyWhen, startReceiver, tenant } from './support.ts';

t.test('a completed generation is delivered once, signed, with the event body of docs/webhooks.md, committed with the terminal state', async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const receiver = await startReceiver(t);
  const who = await tenant(server);
  const endpoint = await createEndpoint(server, who, receiver.url);

  const created = await createGeneration(server, who, 'Say hello');
  const generation = await eventually(async () => {
    const g = await getGeneration(server, who, created.id);
    return g.status === 'succeeded' ? g : undefined;
  }, 'the generation succeeds');
  // Read the moment the terminal state is visible: the delivery is in the same commit, so it is there too.
  const [row] = await server.services.db
    .em()
    .execute<Array<{ id: string; status: string; event_type: string }>>('select id, status, event_type from webhook_deliveries where generation_id = ?', [
      created.id,
    ]);
  if (!row) throw new Error('no delivery row');
  t.ok(row, 'the delivery exists as soon as the terminal state does');
  t.equal(row.event_type, 'generation.completed');

  const [request] = await receiver.waitFor(1);
  const headers = request!.headers;
  t.equal(headers['content-type'], 'application/json');
  t.equal(headers['x-service-event'], 'generation.completed');
  t.equal(headers['x-service-delivery'], row.id);
  t.match(headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
  t.match(headers['x-service-signature'], /^t=\d+,v1=[0-9a-f]{64}$/);

  const event = verifyWebhook(request!.rawBody, headers['x-service-signature'], endpoint.secret);
  t.same(Object.keys(event), ['id', 'event', 'data', 'createdAt'], 'exactly the fields of the spec, in order');
  t.equal(event.id, row.id);
  t.equal(event.event, 'generation.completed');
  t.same(event.data, {
    generationId: generation.id,
    workspaceId: who.workspaceId,
    mode: 'text_to_text',
    modelId: 'local/text-mini',
    status: 'succeeded',
    outputAssetIds: generation.outputAssetIds,
    credits: generation.credits,
    startedAt: generation.startedAt,
    completedAt: generation.completedAt,
  });
  t.match(event.createdAt, /^\d{4}-\d\d-\d\dT/);

  // What must never verify: another secret, a changed body, an old or future timestamp, a mangled header.
  const signature = headers['x-service-signature'] as string;
  const failure = (fn: () => unknown) => {
    try {
      fn();
      return 'verified';
    } catch (error) {
      return (error as WebhookVerificationError).code;
    }
  };
  t.equal(
    failure(() => verifyWebhook(request!.rawBody, signature, 'whsec_other')),
    'signature_mismatch',
  );
  t.equal(
    failure(() => verifyWebhook(Buffer.from(request!.rawBody.toString().replace('"credits":1', '"credits":0')), signature, endpoint.secret)),
    'signature_mismatch',
  );
  t.equal(
    failure(() => verifyWebhook(request!.rawBody, signature, endpoint.secret, { now: Date.now() + 6 * 60_000 })),
    'timestamp_out_of_tolerance',
  );
  t.equal(
    failure(() => verifyWebhook(request!.rawBody, signature, endpoint.secret, { now: Date.now() - 6 * 60_000 })),
    'timestamp_out_of_tolerance',
  );
  t.equal(
    failure(() => verifyWebhook(request!.rawBody, undefined, endpoint.secret)),
    'missing_header',
  );
  t.equal(
    failure(() => verifyWebhook(request!.rawBody, 'v1=abc', endpoint.secret)),
    'malformed_header',
  );
  t.equal(
    failure(() => verifyWebhook(request!.rawBody, signature.replace(/v1=[0-9a-f]{64}/, `v1=${'0'.repeat(64)}`), endpoint.secret)),
    'signature_mismatch',
  );
  t.equal(
    failure(() => verifyWebhook(request!.rawBody, `${signature},v1=${'0'.repeat(64)}`, endpoint.secret)),
    'verified',
    'any one matching v1 is enough (rotation)',
  );

  const [delivery] = await historyWhen(server, who, endpoint.id, (d) => d[0]?.status === 'delivered', 'the delivery is recorded as delivered');
  t.match(delivery, {
    id: row.id,
    endpointId: endpoint.id,
    event: 'generation.completed',
    generationId: created.id,
    status: 'delivered',
    failureReason: null,
    nextAttemptAt: null,
  });
  t.equal(delivery.attempts.length, 1);
  t.match(delivery.attempts[0], { attemptNumber: 1, responseStatus: 200, error: null });
  t.type(delivery.attempts[0].durationMs, 'number');
  t.equal(receiver.received.length, 1, 'sent once');
});

t.test('each of the four events, with failed carrying errorCode and errorMessage; only subscribed, active endpoints get them', async (t) => {
  const clock = new ManualClock(Date.now());
  // The provider takes "ten minutes" of the manual clock, so jobs stay running until cancelled; the queue times out after 1 s.
  const server = await startTestServer(t, { clock, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '600000', QUEUE_TIMEOUT_MS: '1000' } });
  const receiver = await startReceiver(t);
  const onlyFailed = await startReceiver(t);
  const who = await tenant(server);
  const endpoint = await createEndpoint(server, who, receiver.url);
  const failedOnly = await createEndpoint(server, who, onlyFailed.url, ['generation.failed']);

  // The free plan runs two at a time: two are with the provider, the third waits in the queue.
  const running = [await createGeneration(server, who), await createGeneration(server, who)];
  await eventually(
    async () => ((await getGeneration(server, who, running[1]!.id)).status === 'submitted' ? true : undefined),
    'two jobs are with the provider',
  );
  const queued = await createGeneration(server, who);
  clock.advance(1_500);
  await eventually(async () => ((await getGeneration(server, who, queued.id)).status === 'expired' ? true : undefined), 'the queued job expires');
  await cancelGeneration(server, who, running[0]!.id);

  const got = await receiver.waitFor(2);
  const byEvent = new Map(got.map((r) => [r.body.event as string, r]));
  const expired = byEvent.get('generation.expired')!;
  const cancelled = byEvent.get('generation.cancelled')!;
  t.ok(expired && cancelled, 'expired and cancelled arrived');
  t.match(verifyWebhook(expired.rawBody, expired.headers['x-service-signature'], endpoint.secret, { now: clock.now() }).data, {
    generationId: queued.id,
    status: 'expired',
    startedAt: null,
    credits: 1,
  });
  t.match(verifyWebhook(cancelled.rawBody, cancelled.headers['x-service-signature'], endpoint.secret, { now: clock.now() }).data, {
    generationId: running[0]!.id,
    status: 'cancelled',
  });
  t.notOk('errorCode' in expired.body.data, 'only failed carries the error fields');
  t.equal(onlyFailed.received.length, 0, 'an endpoint subscribed to generation.failed only got neither');
  t.equal((await deliveries(server, who, failedOnly.id)).data.length, 0);

  // A disabled endpoint gets nothing new either.
  const disabled = await server.json(`/v1/webhooks/${endpoint.id}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${who.key}` },
    body: JSON.stringify({ workspaceId: who.workspaceId, status: 'disabled' }),
  });
  t.equal(disabled.status, 200);
  await cancelGeneration(server, who, running[1]!.id);
  await eventually(async () => ((await getGeneration(server, who, running[1]!.id)).status === 'cancelled' ? true : undefined), 'cancelled');
  t.same(
    await server.services.db.em().execute('select id from webhook_deliveries where generation_id = ?', [running[1]!.id]),
    [],
    'no delivery for a disabled endpoint',
  );
});

t.test('generation.failed carries data.errorCode and data.errorMessage', async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '0', LOCAL_PROVIDER_FAILURE_PERCENT: '100' } });
  const receiver = await startReceiver(t);
  const who = await tenant(server);
  const endpoint = await createEndpoint(server, who, receiver.url, ['generation.failed']);
  const created = await createGeneration(server, who);
  const [request] = await receiver.waitFor(1);
  const event = verifyWebhook(request!.rawBody, request!.headers['x-service-signature'], endpoint.secret);
  const generation = await getGeneration(server, who, created.id);
  t.equal(generation.status, 'failed');
  t.equal(event.event, 'generation.failed');
  t.equal(request!.headers['x-service-event'], 'generation.failed');
  t.same(event.data, {
    generationId: created.id,
    workspaceId: who.workspaceId,
    mode: 'text_to_text',
    modelId: 'local/text-mini',
    status: 'failed',
    outputAssetIds: [],
    credits: 1,
    startedAt: generation.startedAt,
    completedAt: generation.completedAt,
    errorCode: 'provider_error',
    errorMessage: generation.errorMessage,
  });
  t.type(event.data.errorMessage, 'string');
});

import t from 'tap';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { ManualClock } from '../../runtime/clock.ts';
import { loadConfig } from '../../runtime/config.ts';
import { startService } from '../../app/service.ts';
import { startTestServer } from '../helpers/server.ts';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { createEndpoint, eventually, startReceiver, tenant } from './support.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const traceOf = (header: unknown) => /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(header));

function createTracedGeneration(base: string, key: string, workspaceId: string) {
  return fetch(`${base}/v1/generations`, {
    method: 'POST',
    headers: { ...withKey(key), traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01` },
    body: JSON.stringify({ workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'trace me' } }),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
}

t.test('every attempt of a delivery, the retry after a backoff too, continues the trace of the generation', async (t) => {
  const exporter = new InMemorySpanExporter();
  const clock = new ManualClock(Date.now());
  const server = await startTestServer(t, { clock, spanExporter: exporter, env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const receiver = await startReceiver(t);
  receiver.behave((i) => ({ status: i === 0 ? 500 : 200 }));
  const who = await tenant(server);
  const { id: endpointId } = await createEndpoint(server, who, receiver.url, ['generation.completed']);

  const created = await createTracedGeneration(server.url, who.key, who.workspaceId);
  t.equal(created.status, 201);
  const [first] = await receiver.waitFor(1);
  const [row] = await server.services.db
    .em()
    .execute<Array<{ id: string; trace_parent: string | null }>>('select id, trace_parent from webhook_deliveries where generation_id = ?', [created.body.id]);
  t.equal(traceOf(row!.trace_parent)?.[1], TRACE_ID, "the delivery was stored with the generation's trace");
  t.equal(traceOf(first!.headers.traceparent)?.[1], TRACE_ID, 'the first attempt continues it');

  // The retry starts from a timer of the endpoint actor, with no trace of its own.
  clock.advance(35_000);
  const [, retry] = await receiver.waitFor(2);
  t.equal(traceOf(retry!.headers.traceparent)?.[1], TRACE_ID, 'the retry continues it too');
  t.not(traceOf(retry!.headers.traceparent)?.[2], traceOf(first!.headers.traceparent)?.[2], 'each attempt is a span of its own');

  const storedParent = traceOf(row!.trace_parent)![2];
  const attempts = await eventually(async () => {
    const spans = exporter.getFinishedSpans().filter((s) => s.name === 'webhook attempt');
    return spans.length >= 2 ? spans : undefined;
  }, 'two attempt spans');
  for (const span of attempts) {
    t.equal(span.spanContext().traceId, TRACE_ID);
    t.equal(span.parentSpanContext?.spanId, storedParent, 'a child of the span the delivery was made in');
  }

  // A resend is a new delivery made from the original: it carries the original's trace, and so does its attempt.
  const resent = await fetch(`${server.url}/v1/webhooks/${endpointId}/deliveries/${row!.id}/resend?workspaceId=${who.workspaceId}`, {
    method: 'POST',
    headers: withKey(who.key),
  });
  t.equal(resent.status, 201, 'resent');
  const resentId = ((await resent.json()) as { id: string }).id;
  const [copied] = await server.services.db
    .em()
    .execute<Array<{ trace_parent: string | null }>>('select trace_parent from webhook_deliveries where id = ?', [resentId]);
  t.equal(copied!.trace_parent, row!.trace_parent, "the resend is stored with the original's trace");
  const [, , third] = await receiver.waitFor(3);
  t.equal(traceOf(third!.headers.traceparent)?.[1], TRACE_ID, "the resend's attempt continues the generation's trace");
});

t.test("after a restart, the next attempt of a pending delivery still continues the generation's trace", async (t) => {
  const { dataDir, postgres } = await durableStorage(t, 'gs-webhook-trace-');
  const receiver = await startReceiver(t);
  receiver.behave((i) => ({ status: i === 0 ? 500 : 200 }));
  const boot = async (clock: ManualClock, exporter: InMemorySpanExporter) => {
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      DATA_DIR: dataDir,
      ...(postgres ? { DATABASE_URL: postgres.url } : {}),
      ALLOW_PRIVATE_EGRESS: 'true',
      LOCAL_PROVIDER_LATENCY_MS: '0',
      WEBHOOK_SECRET_KEY: 'k'.repeat(40),
    });
    return startService({ config, clock, spanExporter: exporter });
  };

  const firstClock = new ManualClock(Date.now());
  const first = await boot(firstClock, new InMemorySpanExporter());
  let running: Awaited<ReturnType<typeof boot>> | undefined = first;
  t.teardown(async () => {
    await running?.stop();
  });
  const server = {
    url: first.url,
    json: async (path: string, init?: RequestInit) => {
      const r = await fetch(`${first.url}${path}`, init);
      return { status: r.status, body: (await r.json()) as any, headers: r.headers };
    },
  };
  const user = await signUp(server as any);
  const { key } = await createKey(server as any, user.cookie, user.workspaceId, ['all']);
  await createEndpoint(server as any, { ...user, key }, receiver.url, ['generation.completed']);
  const created = await createTracedGeneration(first.url, key, user.workspaceId);
  const [attempt1] = await receiver.waitFor(1);
  t.equal(traceOf(attempt1!.headers.traceparent)?.[1], TRACE_ID);
  await eventually(async () => {
    const rows = await first.services.db
      .em()
      .execute<Array<{ attempt_count: number }>>('select attempt_count from webhook_deliveries where generation_id = ?', [created.body.id]);
    return rows[0]?.attempt_count === 1 ? true : undefined;
  }, 'the failed attempt is recorded');
  await first.stop();
  running = undefined;

  const exporter = new InMemorySpanExporter();
  const secondClock = new ManualClock(Date.now());
  running = await boot(secondClock, exporter);
  // Recovery wakes the endpoint with no trace of its own; the retry falls due on the new clock.
  secondClock.advance(40_000);
  const [, attempt2] = await receiver.waitFor(2);
  t.equal(traceOf(attempt2!.headers.traceparent)?.[1], TRACE_ID, "the attempt after the restart continues the generation's trace");
});

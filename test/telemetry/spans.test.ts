import t from 'tap';
import { Writable } from 'node:stream';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Type } from '@sinclair/typebox';
import { defineRoute, type RouteDef } from '../../http/route.ts';
import { loadConfig } from '../../runtime/config.ts';
import { startService } from '../../app/service.ts';
import { startTestServer } from '../helpers/server.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { counterBehavior, withCounters } from '../fixtures/counter-actor.ts';
import { eventually } from '../helpers/eventually.ts';

/** GET /v1/test/spans/:id logs a line, then asks a counter actor, which writes through the group-commit writer. */
const probeRoute: RouteDef = defineRoute({
  method: 'GET',
  path: '/v1/test/spans/:id',
  operationId: 'testSpans',
  summary: 'asks a counter actor that persists',
  tags: ['test'],
  access: 'public',
  params: Type.Object({ id: Type.String() }),
  responses: { 200: Type.Object({ value: Type.Integer() }) },
  handler: async ({ params, services }) => {
    services.logger.info({ probe: params.id }, 'probe handler');
    const value = await withCounters(services.actors).ask('counter', params.id, { type: 'inc' });
    return { body: { value } };
  },
});

/** Spans reach an in-memory exporter a little after they end: wait until the ones we need are there. */
const spansFor = (exporter: InMemorySpanExporter, done: (spans: ReadableSpan[]) => boolean): Promise<ReadableSpan[]> =>
  eventually(() => done(exporter.getFinishedSpans()) && exporter.getFinishedSpans(), { timeoutMs: 10_000, what: 'the spans awaited' });

const byName = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
const parentOf = (span: ReadableSpan | undefined) => span?.parentSpanContext?.spanId;

t.test('one request: an HTTP server span, a child span per actor message, its commit wait and batch in the same trace', async (t) => {
  const exporter = new InMemorySpanExporter();
  const { behavior } = counterBehavior('counter');
  const server = await startTestServer(t, { spanExporter: exporter, behaviors: [behavior], routes: [probeRoute] });

  const res = await server.json('/v1/test/spans/s1');
  t.equal(res.status, 200);
  t.same(res.body, { value: 1 });

  const spans = await spansFor(
    exporter,
    (all) => byName(all, 'GET /v1/test/spans/:id').length === 1 && byName(all, 'actor counter inc').length === 1 && byName(all, 'db.batch').length >= 1,
  );
  const [http] = byName(spans, 'GET /v1/test/spans/:id');
  const [actor] = byName(spans, 'actor counter inc');
  t.ok(http, 'a server span named after the method and route template');
  t.ok(actor, 'a span for the actor message, named after kind and message type');
  if (!http || !actor) return;

  t.equal(http.kind, SpanKind.SERVER);
  t.equal(http.attributes['http.route'], '/v1/test/spans/:id');
  t.equal(http.attributes['http.request.method'], 'GET');
  t.equal(http.attributes['http.response.status_code'], 200);
  t.equal(parentOf(http), undefined, 'no traceparent sent: the server span is a root');

  t.equal(actor.kind, SpanKind.INTERNAL);
  t.equal(actor.spanContext().traceId, http.spanContext().traceId, 'actor span in the request trace');
  t.equal(parentOf(actor), http.spanContext().spanId, 'actor span is a child of the HTTP span (context carried in the envelope)');
  t.match(actor.attributes, { 'actor.kind': 'counter', 'actor.id': 's1', 'actor.message': 'inc' });

  // The commit shows in the request's trace: a db.commit.wait child of the actor span, and under it the
  // batch that committed the write (a batch serving one write is that write's child).
  const wait = byName(spans, 'db.commit.wait').find((s) => parentOf(s) === actor.spanContext().spanId);
  t.ok(wait, 'a db.commit.wait span is a child of the actor span whose write it waited for');
  if (!wait) return;
  t.equal(wait.spanContext().traceId, http.spanContext().traceId, 'the wait is in the request trace');
  const batch = byName(spans, 'db.batch').find(
    (s) => parentOf(s) === wait.spanContext().spanId || s.links.some((l) => l.context.spanId === wait.spanContext().spanId),
  );
  t.ok(batch, "the db.batch span that committed the write is the wait span's child (or linked from it)");
  if (!batch) return;
  t.equal(batch.kind, SpanKind.CLIENT);
  t.ok(Number(batch.attributes['db.operation.batch.size']) >= 1);
  t.match(batch.attributes, { 'db.system.name': 'postgresql', 'db.operation.name': 'BATCH' });
  t.equal(batch.attributes['db.system'], undefined, 'no deprecated db.system');
  t.type(batch.attributes['db.namespace'], 'string');
  t.equal(batch.spanContext().traceId, http.spanContext().traceId, 'a batch serving one request is in its trace');
  // Compared by the order the spans ended in (the exporter gets each as it ends), not by their end times:
  // each span anchors its clock to Date.now() when it starts, so two spans' times can disagree by up to 1 ms.
  t.ok(spans.indexOf(batch) < spans.indexOf(wait), 'the wait ends once its batch has committed');

  // The traceparent of the caller becomes the parent of the server span, and the trace flows on to the actor.
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const parentSpanId = '00f067aa0ba902b7';
  exporter.reset();
  const traced = await server.json('/v1/test/spans/s2', { headers: { traceparent: `00-${traceId}-${parentSpanId}-01` } });
  t.equal(traced.status, 200);
  const more = await spansFor(exporter, (all) => byName(all, 'GET /v1/test/spans/:id').length === 1 && byName(all, 'actor counter inc').length === 1);
  const [http2] = byName(more, 'GET /v1/test/spans/:id');
  const [actor2] = byName(more, 'actor counter inc');
  t.equal(http2?.spanContext().traceId, traceId, 'server span continues the caller trace');
  t.equal(parentOf(http2), parentSpanId, 'the caller span is its parent');
  t.equal(actor2?.spanContext().traceId, traceId);
  t.equal(parentOf(actor2), http2?.spanContext().spanId);

  // Errors are recorded on the server span too: an unknown route is a 404 with its route label.
  exporter.reset();
  t.equal((await server.fetch('/v1/test/nowhere')).status, 404);
  const missing = await spansFor(exporter, (all) => byName(all, 'GET unmatched').length === 1);
  t.equal(byName(missing, 'GET unmatched')[0]?.attributes['http.response.status_code'], 404);
});

t.test('a log line written while handling a request carries its trace id; so does one written by the actor', async (t) => {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      callback();
    },
  });
  const exporter = new InMemorySpanExporter();
  const database = await freshDatabaseUrl();
  const config = loadConfig({ PORT: '0', METRICS_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATABASE_URL: database.url, DATA_DIR: '.data/test' });
  const { behavior } = counterBehavior('counter');
  const service = await startService({ config, spanExporter: exporter, logDestination: destination, behaviors: [behavior], routes: [probeRoute] });
  t.teardown(async () => {
    await service.stop();
    await database.drop();
  });

  const res = await fetch(`${service.url}/v1/test/spans/log1`);
  t.equal(res.status, 200);
  const spans = await spansFor(exporter, (all) => byName(all, 'GET /v1/test/spans/:id').length === 1 && byName(all, 'actor counter inc').length === 1);
  const [http] = byName(spans, 'GET /v1/test/spans/:id');
  t.ok(http, 'spans are recorded by a second service started in the same process');
  const line = lines.find((l) => l.msg === 'probe handler' && l.probe === 'log1');
  t.ok(line, 'the handler log line was written');
  t.equal(line?.traceId, http?.spanContext().traceId, 'it carries the trace id of the request');
  t.equal(line?.spanId, http?.spanContext().spanId, 'and the id of the server span');
  t.equal(line?.requestId, res.headers.get('x-request-id'), 'and the request id');
  t.match(line, { level: 30, service: 'generation-service' });

  const [actor] = byName(spans, 'actor counter inc');
  const actorLine = lines.find((l) => l.msg === 'counter incremented' && l.actor === 'counter:log1');
  t.ok(actorLine, 'the actor log line was written, bound to its actor');
  t.equal(actorLine?.traceId, http?.spanContext().traceId, 'the actor line carries the request trace id');
  t.equal(actorLine?.spanId, actor?.spanContext().spanId, 'and the id of the actor span');
});

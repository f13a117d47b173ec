/**
 * The tracing work of one request, in isolation from the server: `node --import tsx bench/micro/span-cost.ts`.
 * The SDK is started as the service starts it (runtime/telemetry-sdk.ts: batch processor, OTLP exporter made to
 * drop what it gets, as bench/servers/noop-trace-export.ts does), and each step is timed in a loop (CPU µs per
 * call, the last of three rounds). What it shows is the floor the SDK sets: a span started and ended, nothing
 * else, costs more than the rest of the request's tracing together.
 */
import '../servers/noop-trace-export.ts';
import { ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { runInRequest } from '../../runtime/request-scope.ts';
import { startTelemetry } from '../../runtime/telemetry.ts';

const telemetry = await startTelemetry({
  tracesExporter: 'otlp',
  otlpEndpoint: 'http://127.0.0.1:9/v1/traces',
  otlpProtocol: 'http/protobuf',
  otlpHeaders: {},
  serviceName: 'span-cost',
  sampler: { name: 'parentbased_always_on', ratio: 1 },
});
const tracer = telemetry.tracer;
/** What the request pipeline (http/pipeline/span-attributes.ts) records on a GET /v1 from autocannon. */
const attributes = () => ({
  'http.request.method': 'GET',
  'url.scheme': 'http',
  'url.path': '/v1',
  'network.protocol.version': '1.1',
  'server.address': '127.0.0.1',
  'server.port': 40123,
  'client.address': '127.0.0.1',
  'user_agent.original': 'autocannon',
});
const work = () => 1;

const steps: Record<string, () => void> = {
  'request scope alone (tracing off)': () => {
    runInRequest('req_1', work, undefined);
  },
  'span started and ended (SDK)': () => {
    tracer.startSpan('GET', { kind: SpanKind.SERVER }, ROOT_CONTEXT).end();
  },
  'the same, attributes at creation': () => {
    tracer.startSpan('GET', { kind: SpanKind.SERVER, attributes: attributes() }, ROOT_CONTEXT).end();
  },
  'the same, attributes set after': () => {
    const span = tracer.startSpan('GET', { kind: SpanKind.SERVER }, ROOT_CONTEXT);
    span.setAttributes(attributes());
    span.end();
  },
  'trace.setSpan + request scope': () => {
    runInRequest(
      'req_1',
      work,
      undefined,
      trace.setSpan(ROOT_CONTEXT, trace.wrapSpanContext({ traceId: '1'.repeat(32), spanId: '1'.repeat(16), traceFlags: 1 })),
    );
  },
  'whole request (http/pipeline/)': () => {
    const span = tracer.startSpan('GET', { kind: SpanKind.SERVER }, ROOT_CONTEXT);
    if (span.isRecording()) span.setAttributes(attributes());
    runInRequest('req_1', work, undefined, trace.setSpan(ROOT_CONTEXT, span));
    span.updateName('GET /v1');
    span.setAttribute('http.route', '/v1');
    span.setAttribute('http.response.status_code', 200);
    span.end();
  },
};

const N = Number(process.env.SPAN_COST_N ?? 300_000);
for (let round = 0; round < 3; round++) {
  for (const [name, step] of Object.entries(steps)) {
    const before = process.cpuUsage();
    for (let i = 0; i < N; i++) {
      step();
      // Promise jobs run now and then, as between requests: the batch processor's export of a full batch ends in one.
      if ((i & 255) === 255) await null;
    }
    const used = process.cpuUsage(before);
    if (round === 2) console.log(`${name.padEnd(36)} ${((used.user + used.system) / N).toFixed(3)} µs`);
  }
  // Let the batch processor's exports run between rounds.
  await new Promise((resolve) => setTimeout(resolve, 20));
}
await telemetry.shutdown();

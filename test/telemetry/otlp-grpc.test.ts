import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { signUp } from '../helpers/identity.ts';
import { eventually } from '../webhooks/support.ts';
import {
  METRICS_EXPORT,
  TRACE_EXPORT,
  decodeExport,
  startGrpcCollector,
  startHttpCollector,
  type Collector,
  type ExportedResource,
} from '../helpers/otlp-collector.ts';

const METRICS_EVERY_200_MS = { OTEL_METRICS_EXPORTER: 'otlp', OTEL_METRIC_EXPORT_INTERVAL: '200', OTEL_METRIC_EXPORT_TIMEOUT: '200' };

const exportsOf = (collector: Collector, path: string, kind: 'traces' | 'metrics'): ExportedResource[] =>
  collector.received.filter((r) => r.path === path).flatMap((r) => decodeExport(r.body, kind));
const namesOf = (resources: ExportedResource[]) => new Set(resources.flatMap((r) => r.names));

t.test('OTEL_EXPORTER_OTLP_PROTOCOL=grpc: spans and metrics reach a gRPC collector at OTEL_EXPORTER_OTLP_ENDPOINT, the headers as metadata', async (t) => {
  const collector = await startGrpcCollector(t);
  const server = await startTestServer(t, {
    env: {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key=grpc%20secret',
      OTEL_SERVICE_NAME: 'gen-over-grpc',
      ...METRICS_EVERY_200_MS,
    },
  });
  t.equal((await server.fetch('/v1')).status, 200);
  await signUp(server);

  const metrics = await eventually(async () => {
    const resources = exportsOf(collector, METRICS_EXPORT, 'metrics');
    return namesOf(resources).has('http.server.request.duration') ? resources : undefined;
  }, 'the collector receives the request histogram over gRPC');
  t.equal(metrics[0]?.attributes['service.name'], 'gen-over-grpc', 'the metrics carry the service name');

  // The spans wait in the batch processor; stopping the service flushes them.
  await server.stop();
  const traces = exportsOf(collector, TRACE_EXPORT, 'traces');
  const spans = namesOf(traces);
  t.ok(spans.has('GET /v1'), 'the span of GET /v1 arrived');
  t.ok(spans.has('POST /v1/auth/signup'), 'the span of the sign-up arrived');
  t.ok(
    traces.every((r) => r.attributes['service.name'] === 'gen-over-grpc'),
    'every span batch carries the service name',
  );
  t.ok(
    traces.every((r) => r.attributes['service.instance.id']),
    'and the instance id',
  );

  const calls = collector.received;
  t.ok(calls.some((r) => r.path === TRACE_EXPORT) && calls.some((r) => r.path === METRICS_EXPORT), 'both services were called');
  t.ok(
    calls.every((r) => r.headers['api-key'] === 'grpc secret'),
    'OTEL_EXPORTER_OTLP_HEADERS is sent as metadata with every export, percent-decoded',
  );
  t.ok(
    calls.every((r) => /OTel-OTLP-Exporter-JavaScript/.test(r.headers['user-agent'] ?? '')),
    'by the official exporters',
  );
});

t.test('the per-signal protocol: traces over gRPC, metrics over http/protobuf, each to its own endpoint', async (t) => {
  const grpcCollector = await startGrpcCollector(t);
  const httpCollector = await startHttpCollector(t);
  const server = await startTestServer(t, {
    env: {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: grpcCollector.url,
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${httpCollector.url}/v1/metrics`,
      ...METRICS_EVERY_200_MS,
    },
  });
  t.equal((await server.fetch('/v1')).status, 200);
  await eventually(
    async () => (namesOf(exportsOf(httpCollector, '/v1/metrics', 'metrics')).has('http.server.request.duration') ? true : undefined),
    'the HTTP collector receives the request histogram, protobuf-encoded',
  );
  await server.stop();
  t.ok(namesOf(exportsOf(grpcCollector, TRACE_EXPORT, 'traces')).has('GET /v1'), 'the span went over gRPC');
  t.same(
    grpcCollector.received.filter((r) => r.path !== TRACE_EXPORT),
    [],
    'no metrics over gRPC',
  );
  t.ok(
    httpCollector.received.every((r) => r.path === '/v1/metrics' && r.headers['content-type'] === 'application/x-protobuf'),
    'nothing else over HTTP, and in protobuf',
  );
});

t.test('the reverse: metrics over gRPC at the shared endpoint (used as it is), traces over http/json at theirs', async (t) => {
  const grpcCollector = await startGrpcCollector(t);
  const httpCollector = await startHttpCollector(t);
  const server = await startTestServer(t, {
    env: {
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_ENDPOINT: grpcCollector.url,
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${httpCollector.url}/v1/traces`,
      ...METRICS_EVERY_200_MS,
    },
  });
  t.equal((await server.fetch('/v1')).status, 200);
  await eventually(
    async () => (namesOf(exportsOf(grpcCollector, METRICS_EXPORT, 'metrics')).has('http.server.request.duration') ? true : undefined),
    'the gRPC collector receives the request histogram',
  );
  await server.stop();
  const traces = httpCollector.received.filter((r) => r.path === '/v1/traces').map((r) => JSON.parse(r.body.toString('utf8')));
  const spans = traces.flatMap((body) => body.resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans.map((s: any) => s.name))));
  t.ok(spans.includes('GET /v1'), 'the span went over HTTP as JSON, to the traces endpoint as it was given');
  t.same(
    grpcCollector.received.filter((r) => r.path !== METRICS_EXPORT),
    [],
    'no spans over gRPC',
  );
});

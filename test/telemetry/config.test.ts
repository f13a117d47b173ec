import t from 'tap';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { trace, type ProxyTracerProvider } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { loadConfig } from '../../runtime/config.ts';
import { problemsOf } from '../helpers/config.ts';
import { startNode } from '../fixtures/child.ts';
import { startTestServer } from '../helpers/server.ts';

t.test('the OTEL_* settings: defaults, and each value read', async (t) => {
  const defaults = loadConfig({}).telemetry;
  t.same(defaults, {
    tracesExporter: 'none',
    otlpEndpoint: undefined,
    otlpProtocol: 'http/protobuf',
    otlpHeaders: {},
    serviceName: 'generation-service',
    sampler: { name: 'parentbased_always_on', ratio: 1 },
  });
  const read = loadConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s%3Dcret, X-Tenant=a',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.25',
    OTEL_SERVICE_NAME: 'gen-eu',
  }).telemetry;
  t.same(read, {
    tracesExporter: 'otlp',
    otlpEndpoint: 'http://collector:4318/v1/traces',
    otlpProtocol: 'http/json',
    otlpHeaders: { 'api-key': 's=cret', 'x-tenant': 'a' },
    serviceName: 'gen-eu',
    sampler: { name: 'parentbased_traceidratio', ratio: 0.25 },
  });
  t.equal(
    loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/custom/traces' }).telemetry.otlpEndpoint,
    'http://collector:4318/custom/traces',
    'the traces endpoint is used as it is',
  );
  t.equal(
    loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/base/' }).telemetry.otlpEndpoint,
    'http://collector:4318/base/v1/traces',
    'the shared endpoint is a base: /v1/traces is appended',
  );
  t.equal(
    loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }).telemetry.otlpProtocol,
    'http/protobuf',
    'the traces-specific setting wins',
  );
  const grpc = loadConfig({
    OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector:4317',
    OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s3cret',
  }).telemetry;
  t.match(
    grpc,
    { tracesExporter: 'otlp', otlpProtocol: 'grpc', otlpEndpoint: 'https://collector:4317', otlpHeaders: { 'api-key': 's3cret' } },
    'grpc: the endpoint is kept as it is',
  );
  t.equal(
    loadConfig({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317/', OTEL_EXPORTER_OTLP_INSECURE: 'true' })
      .telemetry.otlpProtocol,
    'grpc',
    'a plaintext endpoint may say INSECURE=true',
  );
  t.equal(
    loadConfig({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).telemetry.tracesExporter,
    'none',
    'OTEL_SDK_DISABLED turns tracing off',
  );
  t.equal(loadConfig({ ACCESS_LOG: 'false' }).accessLog, false);
  t.equal(loadConfig({}).accessLog, true, 'the access log is on by default');
});

t.test('a bad OTEL_* value stops start-up with its own message', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'bogus' }, /OTEL_EXPORTER_OTLP_PROTOCOL="bogus": expected one of http\/protobuf, http\/json, grpc/],
    [{ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'thrift' }, /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="thrift": expected one of http\/protobuf, http\/json/],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4317/v1/traces' },
      /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: over grpc the endpoint is a scheme, host and port only, without a path \("\/v1\/traces"\)$/,
    ],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector:4317', OTEL_EXPORTER_OTLP_INSECURE: 'true' },
      /^OTEL_EXPORTER_OTLP_INSECURE=true: OTEL_EXPORTER_OTLP_ENDPOINT asks for TLS with its https:\/\/ scheme/,
    ],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_TRACES_INSECURE: 'maybe' },
      /^OTEL_EXPORTER_OTLP_TRACES_INSECURE="maybe": expected true or false/,
    ],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_HEADERS: 'x~key=1' },
      /^OTEL_EXPORTER_OTLP_HEADERS: over grpc a header name is made of a-z, 0-9, '-', '_' and '.' \(not ending in -bin\) and its value of printable ASCII; "x~key" is not$/,
    ],
    [{ OTEL_TRACES_SAMPLER: 'bogus' }, /OTEL_TRACES_SAMPLER="bogus": expected one of always_on, always_off, traceidratio/],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, /OTEL_TRACES_SAMPLER_ARG="1.5": expected a ratio from 0 to 1/],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: 'half' }, /OTEL_TRACES_SAMPLER_ARG="half": expected a ratio from 0 to 1/],
    [{ OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: '0.5' }, /OTEL_TRACES_SAMPLER_ARG: only the traceidratio samplers take an argument/],
    [{ OTEL_TRACES_EXPORTER: 'jaeger' }, /OTEL_TRACES_EXPORTER="jaeger": expected one of none, otlp, console/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT: expected a URL starting with http:\/\/ or https:\/\//],
    [{ OTEL_EXPORTER_OTLP_HEADERS: 'api-key' }, /OTEL_EXPORTER_OTLP_HEADERS: expected name=value pairs separated by commas \(pair 1 is not one\)/],
    [{ OTEL_BSP_SCHEDULE_DELAY: 'soon' }, /OTEL_BSP_SCHEDULE_DELAY="soon": expected a whole number/],
    [{ OTEL_EXPORTER_OTLP_COMPRESSION: 'zstd' }, /OTEL_EXPORTER_OTLP_COMPRESSION="zstd": expected one of gzip, none/],
    [{ OTEL_PROPAGATORS: 'tracecontext,xray' }, /OTEL_PROPAGATORS: "xray" is not one of/],
    [{ OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment' }, /OTEL_RESOURCE_ATTRIBUTES: expected name=value pairs/],
    [{ OTEL_SDK_DISABLED: 'perhaps' }, /OTEL_SDK_DISABLED="perhaps": expected true or false/],
    [{ ACCESS_LOG: 'sometimes' }, /ACCESS_LOG="sometimes": expected true or false/],
  ];
  for (const [env, message] of cases) {
    const problems = problemsOf(env);
    t.equal(problems.length, 1, `${JSON.stringify(env)} is refused`);
    t.match(problems[0], message);
  }
  t.notMatch(
    problemsOf({ OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20topsecret,x' }).join('\n'),
    /topsecret/,
    'a header value is never repeated in a message',
  );
  const accented = problemsOf({
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    OTEL_EXPORTER_OTLP_HEADERS: 'authorization=topsecr%C3%A9t',
  });
  t.match(accented, [/^OTEL_EXPORTER_OTLP_HEADERS: over grpc .* "authorization" is not$/], 'over grpc a value must be printable ASCII');
  t.notMatch(accented.join('\n'), /topsecr/, 'and is not repeated either');
  t.same(
    problemsOf({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317/v1/traces', OTEL_TRACES_EXPORTER: 'none' }),
    [],
    'the gRPC checks wait for an OTLP exporter',
  );
});

t.test('npm start with an unknown OTEL_EXPORTER_OTLP_PROTOCOL exits 78 with the reason', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-otel-config-'));
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const child = startNode(t, 'app/main.ts', { OTEL_EXPORTER_OTLP_PROTOCOL: 'bogus', OTEL_TRACES_SAMPLER: 'bogus', DATA_DIR: dataDir, PORT: '0' });
  const { code } = await child.exited;
  t.equal(code, 78);
  t.match(child.stderr(), /OTEL_EXPORTER_OTLP_PROTOCOL="bogus"/);
  t.match(child.stderr(), /OTEL_TRACES_SAMPLER="bogus"/);
  t.same(await fs.readdir(dataDir), [], 'nothing was opened');
});

t.test('the sampler is honoured', async (t) => {
  const sampledParent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const spansOf = async (env: Record<string, string>, headers: Record<string, string> = {}) => {
    const exporter = new InMemorySpanExporter();
    const server = await startTestServer(t, { spanExporter: exporter, env });
    t.equal((await server.fetch('/v1', { headers })).status, 200);
    t.equal((await server.fetch('/v1', { headers })).status, 200);
    // Every span that ended is exported once the provider's processors have flushed.
    await ((trace.getTracerProvider() as ProxyTracerProvider).getDelegate() as { forceFlush?: () => Promise<void> }).forceFlush?.();
    const count = exporter.getFinishedSpans().filter((s) => s.name === 'GET /v1').length;
    await server.stop();
    return count;
  };
  t.equal(await spansOf({ OTEL_TRACES_SAMPLER: 'always_on' }), 2, 'always_on: every request recorded');
  t.equal(await spansOf({ OTEL_TRACES_SAMPLER: 'always_off' }), 0, 'always_off: none');
  t.equal(await spansOf({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }), 0, 'a ratio of 0: none');
  t.equal(
    await spansOf({ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }, { traceparent: sampledParent }),
    2,
    "parent-based: a sampled caller's trace is recorded",
  );
  t.equal(await spansOf({ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }), 0, 'parent-based, off for roots: a request with no caller trace is not');
});

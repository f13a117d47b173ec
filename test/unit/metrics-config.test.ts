import t, { type Test } from 'tap';
import { loadConfig } from '../../runtime/config.ts';
import { problemsOf } from '../helpers/config.ts';

t.test('by default the Prometheus endpoint is on, on its own port beside the API host', async (t) => {
  const config = loadConfig({ HOST: '10.0.0.5' });
  t.same(config.metrics.exporters, ['prometheus']);
  t.equal(config.metrics.port, 9464);
  t.equal(config.metrics.host, '10.0.0.5', 'METRICS_HOST defaults to HOST');
  t.equal(config.metrics.exportIntervalMs, 60_000);
});

t.test('OTLP: turned on by its endpoint or by name; the shared endpoint gets /v1/metrics; protocol and interval read', async (t) => {
  const byEndpoint = loadConfig({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://collector:4318/custom/metrics' });
  t.same(byEndpoint.metrics.exporters, ['prometheus', 'otlp']);
  t.equal(byEndpoint.metrics.otlpEndpoint, 'http://collector:4318/custom/metrics', 'the signal endpoint is used as it is');
  const byName = loadConfig({
    OTEL_METRICS_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json',
    OTEL_METRIC_EXPORT_INTERVAL: '15000',
  });
  t.same(byName.metrics.exporters, ['otlp']);
  t.equal(byName.metrics.otlpEndpoint, 'http://collector:4318/v1/metrics');
  t.equal(byName.metrics.otlpProtocol, 'http/json');
  t.equal(byName.metrics.exportIntervalMs, 15_000);
  t.same(
    loadConfig({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'api-key=m%3D1', OTEL_EXPORTER_OTLP_HEADERS: 'api-key=shared' }).metrics
      .otlpHeaders,
    { 'api-key': 'm=1' },
    'the metrics headers win over the shared ones',
  );
  t.same(loadConfig({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_HEADERS: 'api-key=shared' }).metrics.otlpHeaders, { 'api-key': 'shared' });
  t.same(loadConfig({ OTEL_METRICS_EXPORTER: 'none' }).metrics.exporters, []);
  t.same(loadConfig({ OTEL_METRICS_EXPORTER: ' prometheus , otlp ' }).metrics.exporters, ['prometheus', 'otlp']);
});

t.test('grpc: the shared endpoint is used as it is, no /v1/metrics; the metrics setting may differ from the traces one', async (t) => {
  const shared = loadConfig({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317' });
  t.equal(shared.metrics.otlpProtocol, 'grpc');
  t.equal(shared.metrics.otlpEndpoint, 'http://collector:4317');
  t.equal(shared.telemetry.otlpProtocol, 'grpc', "the shared setting is the traces' too");
  const own = loadConfig({
    OTEL_METRICS_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'grpc',
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'https://metrics.example:4317',
  });
  t.equal(own.metrics.otlpProtocol, 'grpc');
  t.equal(own.metrics.otlpEndpoint, 'https://metrics.example:4317');
  t.equal(own.telemetry.otlpProtocol, 'http/protobuf', 'the traces keep the default');
  t.equal(
    loadConfig({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json' }).metrics.otlpProtocol,
    'http/json',
    'the metrics setting wins',
  );
});

/** `env` is refused with this one message (and no other). */
function refused(t: Test, env: Record<string, string>, message: RegExp, what?: string): void {
  const problems = problemsOf(env);
  t.equal(problems.length, 1, what ?? `${JSON.stringify(env)} is refused once`);
  t.match(problems[0], message, what ?? 'with its message');
}

t.test('bad values stop start-up with their message', async (t) => {
  refused(t, { OTEL_METRICS_EXPORTER: 'bogus' }, /^OTEL_METRICS_EXPORTER="bogus": expected none, or prometheus and\/or otlp/);
  refused(t, { OTEL_METRICS_EXPORTER: 'none,otlp' }, /none cannot be combined/);
  refused(t, { METRICS_PORT: '70000' }, /^METRICS_PORT="70000": expected a whole number from 0 to 65535/);
  refused(t, { METRICS_HOST: 'a b' }, /^METRICS_HOST="a b"/);
  refused(t, { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'ftp://x' }, /^OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: expected a URL/);
  refused(
    t,
    { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'thrift' },
    /^OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="thrift": metrics are exported over http\/protobuf, http\/json or grpc only$/,
  );
  refused(
    t,
    { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'bogus' },
    /^OTEL_EXPORTER_OTLP_PROTOCOL="bogus": expected one of http\/protobuf, http\/json, grpc/,
    'the shared setting is refused once',
  );
  refused(
    t,
    { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'bogus', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' },
    /^OTEL_EXPORTER_OTLP_PROTOCOL="bogus": metrics are exported over/,
    'by the metrics when the traces have their own',
  );
  refused(
    t,
    { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_HEADERS: 'api-key' },
    /^OTEL_EXPORTER_OTLP_HEADERS: expected name=value pairs/,
    'headers read by traces and metrics both: refused once',
  );
  refused(
    t,
    { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'api-key' },
    /^OTEL_EXPORTER_OTLP_METRICS_HEADERS: expected name=value pairs/,
  );
  refused(
    t,
    { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://collector:4317/v1/metrics' },
    /^OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: over grpc the endpoint is a scheme, host and port only/,
  );
  refused(
    t,
    {
      OTEL_METRICS_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'https://collector:4317',
      OTEL_EXPORTER_OTLP_METRICS_INSECURE: 'true',
    },
    /^OTEL_EXPORTER_OTLP_METRICS_INSECURE=true: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT asks for TLS/,
  );
  refused(
    t,
    { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317/otlp' },
    /^OTEL_EXPORTER_OTLP_ENDPOINT: over grpc the endpoint/,
    'the shared endpoint, read by both signals, refused once',
  );
  refused(t, { OTEL_METRIC_EXPORT_INTERVAL: 'soon' }, /^OTEL_METRIC_EXPORT_INTERVAL="soon": expected a whole number/);
  refused(
    t,
    { OTEL_METRICS_EXPORTER: 'otlp', OTEL_METRIC_EXPORT_INTERVAL: '1000', OTEL_METRIC_EXPORT_TIMEOUT: '5000' },
    /must not exceed OTEL_METRIC_EXPORT_INTERVAL/,
  );
  t.same(
    problemsOf({ OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'bogus', OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'x' }),
    [],
    'OTLP settings are read only when OTLP is on',
  );
});

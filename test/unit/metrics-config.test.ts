import t from 'tap';
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
  const byName = loadConfig({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/', OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json', OTEL_METRIC_EXPORT_INTERVAL: '15000' });
  t.same(byName.metrics.exporters, ['otlp']);
  t.equal(byName.metrics.otlpEndpoint, 'http://collector:4318/v1/metrics');
  t.equal(byName.metrics.otlpProtocol, 'http/json');
  t.equal(byName.metrics.exportIntervalMs, 15_000);
  t.same(loadConfig({ OTEL_METRICS_EXPORTER: 'none' }).metrics.exporters, []);
  t.same(loadConfig({ OTEL_METRICS_EXPORTER: ' prometheus , otlp ' }).metrics.exporters, ['prometheus', 'otlp']);
});

t.test('bad values stop start-up with their message', async (t) => {
  t.match(problemsOf({ OTEL_METRICS_EXPORTER: 'bogus' }), [/^OTEL_METRICS_EXPORTER="bogus": expected none, or prometheus and\/or otlp/]);
  t.match(problemsOf({ OTEL_METRICS_EXPORTER: 'none,otlp' }), [/none cannot be combined/]);
  t.match(problemsOf({ METRICS_PORT: '70000' }), [/^METRICS_PORT="70000": expected a whole number from 0 to 65535/]);
  t.match(problemsOf({ METRICS_HOST: 'a b' }), [/^METRICS_HOST="a b"/]);
  t.match(problemsOf({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'ftp://x' }), [/^OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: expected a URL/]);
  t.match(problemsOf({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'grpc' }), [/^OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="grpc": metrics are exported over http\/protobuf or http\/json only/]);
  t.match(problemsOf({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), [/^OTEL_EXPORTER_OTLP_PROTOCOL="grpc": OTLP over gRPC is not supported/], 'the shared setting is refused once');
  t.match(problemsOf({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }), [/^OTEL_EXPORTER_OTLP_PROTOCOL="grpc": metrics are exported over/], 'by the metrics when the traces have their own');
  t.match(problemsOf({ OTEL_METRIC_EXPORT_INTERVAL: 'soon' }), [/^OTEL_METRIC_EXPORT_INTERVAL="soon": expected a whole number/]);
  t.match(problemsOf({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_METRIC_EXPORT_INTERVAL: '1000', OTEL_METRIC_EXPORT_TIMEOUT: '5000' }), [/must not exceed OTEL_METRIC_EXPORT_INTERVAL/]);
  t.same(problemsOf({ OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'grpc' }), [], 'OTLP settings are read only when OTLP is on');
});

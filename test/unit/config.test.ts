import t from 'tap';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../runtime/config.ts';

t.test('defaults give the embedded set-up', async (t) => {
  const config = loadConfig({});
  t.equal(config.port, 8080);
  t.equal(config.host, '127.0.0.1');
  t.equal(config.baseUrl, 'http://127.0.0.1:8080');
  t.equal(config.databaseUrl, undefined);
  t.equal(config.redisUrl, undefined);
  t.equal(config.dataDir, path.resolve('.data'));
  t.equal(config.logLevel, 'info');
  t.equal(config.allowUwsFallback, false);
  t.equal(config.telemetry.tracesExporter, 'none');
});

t.test('values are read and normalised', async (t) => {
  const config = loadConfig({
    PORT: '9000', HOST: '0.0.0.0', BASE_URL: 'https://api.example.com/', DATABASE_URL: 'postgres://u@db:5432/x',
    REDIS_URL: 'redis://cache:6379', LOG_LEVEL: 'debug', ALLOW_UWS_FALLBACK: 'yes', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
  });
  t.equal(config.port, 9000);
  t.equal(config.baseUrl, 'https://api.example.com');
  t.equal(config.databaseUrl, 'postgres://u@db:5432/x');
  t.equal(config.redisUrl, 'redis://cache:6379');
  t.equal(config.allowUwsFallback, true);
  t.equal(config.telemetry.tracesExporter, 'otlp', 'an OTLP endpoint turns the exporter on');
  t.equal(config.telemetry.otlpEndpoint, 'http://collector:4318');
  t.equal(loadConfig({ HOST: '0.0.0.0', PORT: '1234' }).baseUrl, 'http://localhost:1234');
});

t.test('every bad value is reported at once, each with its own message', async (t) => {
  try {
    loadConfig({ PORT: '70000', DATABASE_URL: 'mysql://x', REDIS_URL: 'not a url', LOG_LEVEL: 'loud', ALLOW_UWS_FALLBACK: 'maybe', BODY_LIMIT_BYTES: '-1', OTEL_TRACES_EXPORTER: 'zipkin' });
    t.fail('should have thrown');
  } catch (error) {
    t.ok(error instanceof ConfigError);
    const problems = (error as ConfigError).problems;
    t.equal(problems.length, 7);
    t.match(problems.join('\n'), /PORT="70000": expected a whole number from 0 to 65535/);
    t.match(problems.join('\n'), /DATABASE_URL: expected a URL starting with postgres:\/\/ or postgresql:\/\/ or memory:\/\//);
    t.match(problems.join('\n'), /REDIS_URL: not a valid URL/);
    t.match(problems.join('\n'), /LOG_LEVEL="loud": expected one of/);
    t.match(problems.join('\n'), /ALLOW_UWS_FALLBACK="maybe": expected true or false/);
    t.match(problems.join('\n'), /BODY_LIMIT_BYTES/);
    t.match(problems.join('\n'), /OTEL_TRACES_EXPORTER="zipkin"/);
  }
});

t.test('the OpenAI-compatible provider: off unless OPENAI_BASE_URL is set; the key is then required', async (t) => {
  t.equal(loadConfig({}).openai, undefined);
  t.same(loadConfig({ OPENAI_BASE_URL: 'http://127.0.0.1:9999/v1/', OPENAI_API_KEY: 'sk-x', OPENAI_MAX_CONCURRENT_JOBS: '4' }).openai, {
    baseUrl: 'http://127.0.0.1:9999/v1', apiKey: 'sk-x', chatModel: 'gpt-4o-mini', imageModel: 'dall-e-3', timeoutMs: 120_000, maxConcurrentJobs: 4,
  });
  t.equal(loadConfig({ OPENAI_BASE_URL: 'https://x.example/v1', OPENAI_API_KEY: 'k' }).openai?.maxConcurrentJobs, undefined, '0 or unset: no limit');
  t.throws(() => loadConfig({ OPENAI_BASE_URL: 'https://x.example/v1' }), /OPENAI_API_KEY: required when OPENAI_BASE_URL is set/);
  t.throws(() => loadConfig({ OPENAI_BASE_URL: 'ftp://x', OPENAI_API_KEY: 'k', OPENAI_TIMEOUT_MS: '5' }), /OPENAI_BASE_URL[\s\S]*OPENAI_TIMEOUT_MS|OPENAI_TIMEOUT_MS[\s\S]*OPENAI_BASE_URL/);
  t.equal(loadConfig({ LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '3' }).generations.localMaxConcurrentJobs, 3);
  t.equal(loadConfig({}).generations.localMaxConcurrentJobs, undefined);
});

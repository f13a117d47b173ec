import t from 'tap';
import { readProviderSettings } from '../../providers/kinds.ts';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../runtime/config.ts';
import { startNode } from '../fixtures/child.ts';

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
  t.equal(config.groupCommit.windowMs, 0, 'an idle group-commit writer commits at once, with no window to wait out');
});

t.test('values are read and normalised', async (t) => {
  const config = loadConfig({
    PORT: '9000',
    HOST: '0.0.0.0',
    BASE_URL: 'https://api.example.com/',
    DATABASE_URL: 'postgres://u@db:5432/x',
    REDIS_URL: 'redis://cache:6379',
    LOG_LEVEL: 'debug',
    ALLOW_UWS_FALLBACK: 'yes',
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
  });
  t.equal(config.port, 9000);
  t.equal(config.baseUrl, 'https://api.example.com');
  t.equal(config.databaseUrl, 'postgres://u@db:5432/x');
  t.equal(config.redisUrl, 'redis://cache:6379');
  t.equal(config.allowUwsFallback, true);
  t.equal(config.telemetry.tracesExporter, 'otlp', 'an OTLP endpoint turns the exporter on');
  t.equal(config.telemetry.otlpEndpoint, 'http://collector:4318/v1/traces', 'the shared endpoint is a base: the traces path is appended');
  t.equal(loadConfig({ HOST: '0.0.0.0', PORT: '1234' }).baseUrl, 'http://localhost:1234');
});

t.test('every bad value is reported at once, each with its own message', async (t) => {
  try {
    loadConfig({
      PORT: '70000',
      DATABASE_URL: 'mysql://x',
      REDIS_URL: 'not a url',
      LOG_LEVEL: 'loud',
      ALLOW_UWS_FALLBACK: 'maybe',
      BODY_LIMIT_BYTES: '-1',
      OTEL_TRACES_EXPORTER: 'zipkin',
    });
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

t.test('provider kinds: each off unless configured; every problem of every kind named, no secret in it', async (t) => {
  t.same([...readProviderSettings({}).settings.keys()], [], 'nothing configured: only the built-in local provider runs jobs');
  const configured = readProviderSettings({ OPENAI_BASE_URL: 'http://127.0.0.1:9999/v1/', OPENAI_API_KEY: 'sk-x', REPLICATE_API_TOKEN: 'r8_abc' });
  t.same([...configured.settings.keys()].sort(), ['openai', 'replicate']);
  t.same(configured.problems, []);
  const wrong = readProviderSettings({
    OPENAI_BASE_URL: 'https://x.example/v1',
    FAL_KEY: 'k',
    FAL_WEBHOOK_JWKS: 'not json {',
    COG_BASE_URL: 'http://cog:5000',
  });
  t.match(wrong.problems.join('\n'), /OPENAI_API_KEY/);
  t.match(wrong.problems.join('\n'), /FAL_WEBHOOK_JWKS/);
  t.match(wrong.problems.join('\n'), /COG_WEBHOOK_SECRET/);
  t.notOk(wrong.settings.has('openai') || wrong.settings.has('cog'), 'a kind with a problem is not configured');
  t.notOk(wrong.problems.join('\n').includes('not json {'), 'no value of a secret in a problem');
  t.equal(loadConfig({ LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '3' }).generations.localMaxConcurrentJobs, 3);
  t.equal(loadConfig({}).generations.localMaxConcurrentJobs, undefined);
});

t.test('cluster mode: off by default; its settings read with CLUSTER=true on PostgreSQL with Redis', async (t) => {
  t.equal(loadConfig({}).cluster, undefined);
  const secret = 's'.repeat(32);
  const base = {
    DATABASE_URL: 'postgres://u@db:5432/x',
    REDIS_URL: 'redis://cache:6379',
    PORT: '9000',
    CLUSTER_SECRET: secret,
    WEBHOOK_SECRET_KEY: 'w'.repeat(32),
    BILLING_SIGNING_SECRET: 'b'.repeat(32),
    BLOB_SIGNING_SECRET: 'l'.repeat(32),
  };
  const cluster = loadConfig({ ...base, CLUSTER: 'true' }).cluster!;
  t.equal(cluster.nodeId, `${os.hostname()}:9000`, 'the node id defaults to host:port');
  t.same(
    { ...cluster, nodeId: undefined, internalAddress: undefined },
    { nodeId: undefined, internalAddress: undefined, internalPort: 8081, heartbeatMs: 1000, deadAfterMs: 5000, leaseMs: 5000, shards: 64, secret },
  );
  t.same(
    loadConfig({
      ...base,
      CLUSTER: '1',
      CLUSTER_NODE_ID: 'node-a',
      CLUSTER_INTERNAL_ADDRESS: '10.0.0.7',
      CLUSTER_INTERNAL_PORT: '7001',
      CLUSTER_HEARTBEAT_MS: '200',
      CLUSTER_DEAD_AFTER_MS: '1000',
      CLUSTER_LEASE_MS: '800',
      CLUSTER_SHARDS: '16',
    }).cluster,
    { nodeId: 'node-a', internalAddress: '10.0.0.7', internalPort: 7001, heartbeatMs: 200, deadAfterMs: 1000, leaseMs: 800, shards: 16, secret },
  );
  t.throws(() => loadConfig({ ...base, CLUSTER: 'true', CLUSTER_SECRET: 'short' }), /CLUSTER_SECRET: required in cluster mode, at least 32 characters/);
  t.throws(() => loadConfig({ ...base, CLUSTER: 'true', CLUSTER_SECRET: undefined }), /CLUSTER_SECRET: required in cluster mode/);
  t.throws(
    () => loadConfig({ ...base, CLUSTER: 'true', WEBHOOK_SECRET_KEY: undefined, BLOB_SIGNING_SECRET: undefined }),
    /WEBHOOK_SECRET_KEY, BLOB_SIGNING_SECRET: required in cluster mode, the same on every node/,
  );
  t.equal(loadConfig({ CLUSTER: 'false' }).cluster, undefined, 'CLUSTER=false is accepted on PGlite');
});

t.test('cluster mode is refused on PGlite, without Redis, with bad timings, or with settings but no CLUSTER=true', async (t) => {
  t.throws(
    () => loadConfig({ CLUSTER: 'true' }),
    /CLUSTER=true: cluster mode needs PostgreSQL \(DATABASE_URL=postgres:\/\/…\); PGlite runs a single node only/,
  );
  t.throws(
    () => loadConfig({ DATABASE_URL: 'memory://', CLUSTER_NODE_ID: 'a', CLUSTER_SHARDS: '8' }),
    /CLUSTER_NODE_ID, CLUSTER_SHARDS: cluster mode needs PostgreSQL/,
  );
  t.throws(() => loadConfig({ DATABASE_URL: 'postgres://u@db/x', CLUSTER: 'true' }), /CLUSTER=true: cluster mode needs REDIS_URL/);
  t.throws(
    () => loadConfig({ DATABASE_URL: 'postgres://u@db/x', REDIS_URL: 'redis://c', CLUSTER_NODE_ID: 'a' }),
    /CLUSTER_NODE_ID: only read in cluster mode; set CLUSTER=true/,
  );
  try {
    loadConfig({
      DATABASE_URL: 'postgres://u@db/x',
      REDIS_URL: 'redis://c',
      CLUSTER: 'true',
      CLUSTER_NODE_ID: 'a b',
      CLUSTER_HEARTBEAT_MS: '1000',
      CLUSTER_DEAD_AFTER_MS: '1500',
      CLUSTER_LEASE_MS: '1999',
      CLUSTER_SHARDS: '0',
    });
    t.fail('should have thrown');
  } catch (error) {
    const problems = (error as ConfigError).problems.join('\n');
    t.match(problems, /CLUSTER_NODE_ID="a b": expected 1 to 128 letters/);
    t.match(problems, /CLUSTER_DEAD_AFTER_MS=1500: must be at least twice CLUSTER_HEARTBEAT_MS \(1000\)/);
    t.match(problems, /CLUSTER_LEASE_MS=1999: must be at least twice CLUSTER_HEARTBEAT_MS/);
    t.match(problems, /CLUSTER_SHARDS="0": expected a whole number from 1 to 4096/);
  }
});

t.test('npm start with a cluster setting on PGlite exits 78 with the reason, before opening anything', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-cluster-config-'));
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const child = startNode(t, 'app/main.ts', { CLUSTER: 'true', DATA_DIR: dataDir, PORT: '0' });
  const { code } = await child.exited;
  t.equal(code, 78);
  t.match(child.stderr(), /CLUSTER=true: cluster mode needs PostgreSQL/);
  t.same(await fs.readdir(dataDir), [], 'no database was created');
});

t.test('LOOPBACK_EGRESS: auto is on only for a service reachable from this machine alone', async (t) => {
  t.equal(loadConfig({}).allowLoopbackEgress, true, "npm start's defaults: bound to 127.0.0.1, no BASE_URL");
  t.equal(loadConfig({ HOST: 'localhost' }).allowLoopbackEgress, true, 'HOST localhost');
  t.equal(loadConfig({ HOST: '::1' }).allowLoopbackEgress, true, 'HOST ::1');
  t.equal(loadConfig({ HOST: '0.0.0.0' }).allowLoopbackEgress, false, 'bound to every interface: off');
  t.equal(loadConfig({ HOST: '10.0.0.5' }).allowLoopbackEgress, false, 'bound to a private interface: off');
  t.equal(loadConfig({ BASE_URL: 'https://api.example.com' }).allowLoopbackEgress, false, 'behind a proxy with a public BASE_URL: off');
  t.equal(loadConfig({ BASE_URL: 'http://localhost:8080' }).allowLoopbackEgress, true, 'a loopback BASE_URL keeps it on');
  t.equal(loadConfig({ NODE_ENV: 'production' }).allowLoopbackEgress, false, 'NODE_ENV=production: off');
  t.equal(loadConfig({ LOOPBACK_EGRESS: 'false' }).allowLoopbackEgress, false, 'false: off whatever the rest');
  t.equal(loadConfig({ LOOPBACK_EGRESS: 'true', HOST: '0.0.0.0' }).allowLoopbackEgress, true, 'true: on whatever the rest');
  t.throws(() => loadConfig({ LOOPBACK_EGRESS: 'sometimes' }), ConfigError, 'any other value stops start-up');
});

import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import { ROOT } from '../fixtures/child.ts';
import { checkClusterNodes } from './cluster-settings.ts';

/**
 * deploy/compose.yaml, read as Compose reads it (YAML merge keys, `${VAR}` from deploy/.env, here its
 * example), with no container engine: the nodes' settings against the service's configuration
 * (cluster-settings.ts), the secrets from the one .env file, and HAProxy's configuration against the nodes.
 */
const DEPLOY = path.join(ROOT, 'deploy');
const exampleText = await fs.readFile(path.join(DEPLOY, '.env.example'), 'utf8');
const example = Object.fromEntries(
  exampleText
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
);
const used = new Set<string>();

/** Compose's interpolation: ${NAME}, ${NAME:?message}, ${NAME:-default} (and without the colon), $$ for a dollar. */
function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}/g,
    (_whole, name: string | undefined, op: string | undefined, arg: string | undefined) => {
      if (!name) return '$';
      used.add(name);
      const given = vars[name];
      const empty = given === undefined || (op?.startsWith(':') && given === '');
      if (op?.endsWith('?') && empty) throw new Error(`${name}: ${arg}`);
      if (op?.endsWith('-') && empty) return arg ?? '';
      return given ?? '';
    },
  );
}

function resolve(node: unknown, vars: Record<string, string>): unknown {
  if (typeof node === 'string') return interpolate(node, vars);
  if (Array.isArray(node)) return node.map((item) => resolve(item, vars));
  if (node && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, resolve(v, vars)]));
  return node;
}

interface Service {
  image?: string;
  environment?: Record<string, string | number | boolean>;
  stop_grace_period?: string;
  volumes?: string[];
  ports?: string[];
  depends_on?: unknown;
}
const raw = parse(await fs.readFile(path.join(DEPLOY, 'compose.yaml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const compose = resolve(raw, example) as typeof raw;
const nodeNames = Object.keys(compose.services).filter((name) => String(compose.services[name]!.environment?.CLUSTER) === 'true');
const nodes = nodeNames.map((name) => ({
  name,
  env: Object.fromEntries(Object.entries(compose.services[name]!.environment ?? {}).map(([k, v]) => [k, String(v)])),
}));

t.test('PostgreSQL, Redis, three cluster nodes and HAProxy', async (t) => {
  t.same(Object.keys(compose.services).sort(), ['gs-1', 'gs-2', 'gs-3', 'haproxy', 'postgres', 'redis']);
  t.same(nodeNames, ['gs-1', 'gs-2', 'gs-3']);
});

t.test('every node: settings the service reads, cluster mode complete, ids and internal addresses unique', async (t) => {
  const configs = checkClusterNodes(t, nodes);
  for (const [i, config] of configs.entries()) {
    const name = nodeNames[i]!;
    t.equal(config.cluster?.internalAddress, name, `${name}: the other nodes reach it at its service name`);
    t.equal(new URL(config.databaseUrl!).hostname, 'postgres', `${name}: the Compose PostgreSQL`);
    t.equal(new URL(config.redisUrl!).hostname, 'redis', `${name}: the Compose Redis`);
    const grace = /^(\d+)s$/.exec(compose.services[name]!.stop_grace_period ?? '')?.[1];
    t.ok(
      Number(grace) * 1000 > config.shutdownTimeoutMs,
      `${name}: Compose waits (${grace} s) longer than the drain may take (SHUTDOWN_TIMEOUT_MS ${config.shutdownTimeoutMs} ms) before SIGKILL`,
    );
    if (config.blobStore.kind === 'local') {
      const mount = compose.services[name]!.volumes?.find((v) => v.split(':')[1] === config.dataDir);
      t.match(mount, /^assets:/, `${name}: DATA_DIR is the volume every node shares (the local blob store)`);
    }
  }
});

t.test('every secret comes from deploy/.env, and the example names no variable nothing uses', async (t) => {
  const secrets = ['CLUSTER_SECRET', 'WEBHOOK_SECRET_KEY', 'BILLING_SIGNING_SECRET', 'BLOB_SIGNING_SECRET'];
  for (const name of nodeNames) {
    const env = raw.services[name]!.environment ?? {};
    for (const secret of secrets) t.match(String(env[secret]), new RegExp(`^\\$\\{${secret}:\\?`), `${name}: ${secret} is read from .env, required`);
    t.match(String(env.DATABASE_URL), /\$\{POSTGRES_PASSWORD:\?/, `${name}: the database password from .env`);
    t.match(String(env.REDIS_URL), /\$\{REDIS_PASSWORD:\?/, `${name}: the Redis password from .env`);
  }
  t.same(
    Object.keys(example).filter((name) => !used.has(name)),
    [],
    'each variable of .env.example is used',
  );
  t.same([...used].filter((name) => !(name in example)).sort(), [], 'each variable used is in .env.example');
  for (const [name, value] of Object.entries(example)) t.ok(value.length >= 32, `${name}: the example is as long as a real one must be`);
  t.throws(() => resolve(raw, {}), /set in deploy\/\.env/, 'a missing secret stops Compose');
});

t.test('HAProxy balances the three nodes, checked on /health/ready', async (t) => {
  const cfg = await fs.readFile(path.join(DEPLOY, 'haproxy/haproxy.cfg'), 'utf8');
  const servers = [...cfg.matchAll(/^\s*server\s+(\S+)\s+(\S+):(\d+)\s+check\b/gm)].map((m) => ({ name: m[1], host: m[2], port: m[3] }));
  t.same(
    servers.map((s) => s.host),
    nodeNames,
    'one server line per node, by its service name',
  );
  for (const server of servers) t.equal(server.port, String(nodes.find((n) => n.name === server.host)?.env.PORT), `${server.name}: on the node's PORT`);
  t.match(cfg, /http-check send meth GET uri \/health\/ready/, 'the check asks readiness');
  t.match(cfg, /http-check expect status 200/);
  t.match(cfg, /option redispatch/);
  t.notMatch(cfg, /retry-on[^\n]*503/, "no retry on 503: the service's 503s are the client's to retry");
  const haproxy = compose.services.haproxy!;
  t.same(haproxy.ports, ['8080:8080'], 'the balancer alone is published');
  t.match(haproxy.volumes?.[0], /^\.\/haproxy\/haproxy\.cfg:\/usr\/local\/etc\/haproxy\/haproxy\.cfg:ro$/, 'with this configuration');
  for (const name of nodeNames) t.notOk(compose.services[name]!.ports, `${name}: not published`);
  t.match(nodes[0]!.env.BASE_URL, /:8080$/, "BASE_URL is the balancer's address");
});

import type { Test } from 'tap';
import { ConfigError, loadConfig, type Config } from '../../runtime/config.ts';

/**
 * The rules every deployment of a cluster must keep, checked on each node's environment as a deployment
 * file sets it (Compose, Kubernetes), through the service's own configuration: runtime/config.ts is run
 * on that environment and every name it reads is recorded, so a variable the service does not read (a
 * typo, a setting renamed or removed) is found without a second list of names to keep in step.
 */

export interface NodeSettings {
  /** Where the node is declared, for messages (a Compose service, a pod). */
  name: string;
  env: Record<string, string>;
}

export interface ReadSettings {
  config: Config | undefined;
  problems: string[];
  /** Every variable loadConfig looked at for this environment. */
  read: Set<string>;
}

export function readSettings(env: Record<string, string>): ReadSettings {
  const read = new Set<string>();
  const recording = new Proxy(
    { ...env },
    {
      get(target, name, receiver) {
        if (typeof name === 'string') read.add(name);
        return Reflect.get(target, name, receiver);
      },
    },
  );
  try {
    return { config: loadConfig(recording), problems: [], read };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { config: undefined, problems: error.problems, read };
  }
}

/** Settings a cluster node must be given explicitly: their defaults are one machine's (host name, secrets generated under DATA_DIR). */
const EXPLICIT = [
  'CLUSTER',
  'CLUSTER_NODE_ID',
  'CLUSTER_INTERNAL_ADDRESS',
  'CLUSTER_SECRET',
  'DATABASE_URL',
  'REDIS_URL',
  'WEBHOOK_SECRET_KEY',
  'BILLING_SIGNING_SECRET',
  'BASE_URL',
  'HOST',
];

/** What must be the same on every node (docs/cluster.md, Settings). */
function shared(config: Config): Record<string, unknown> {
  const { cluster } = config;
  return {
    databaseUrl: config.databaseUrl,
    redisUrl: config.redisUrl,
    redisKeyPrefix: config.redisKeyPrefix,
    baseUrl: config.baseUrl,
    clusterSecret: cluster?.secret,
    shards: cluster?.shards,
    heartbeatMs: cluster?.heartbeatMs,
    deadAfterMs: cluster?.deadAfterMs,
    leaseMs: cluster?.leaseMs,
    webhookSecretKey: config.webhooks.secretKey,
    billingSigningSecret: config.billing.signingSecret,
    blobStore: config.blobStore,
  };
}

/**
 * Checks a cluster's nodes: each sets only variables the service reads, its settings are accepted with
 * cluster mode on, and what cluster mode needs is set; across nodes, ids and internal addresses are
 * unique and the shared settings equal. Returns each node's configuration.
 */
export function checkClusterNodes(t: Test, nodes: NodeSettings[]): Config[] {
  t.ok(nodes.length >= 3, `three nodes or more (${nodes.length})`);
  const configs: Config[] = [];
  for (const node of nodes) {
    const { config, problems, read } = readSettings(node.env);
    t.same(
      Object.keys(node.env).filter((name) => !read.has(name)),
      [],
      `${node.name}: every variable it sets is one the service reads`,
    );
    t.same(problems, [], `${node.name}: the service accepts its settings`);
    const local = config?.blobStore.kind === 'local';
    const missing = [...EXPLICIT, ...(local ? ['BLOB_SIGNING_SECRET'] : [])].filter((name) => !node.env[name]?.trim());
    t.same(missing, [], `${node.name}: cluster mode's settings are all given`);
    if (!config) continue;
    t.ok(config.cluster, `${node.name}: cluster mode is on`);
    t.ok(config.databaseUrl?.startsWith('postgres'), `${node.name}: on PostgreSQL`);
    t.not(config.host, '127.0.0.1', `${node.name}: listens where the balancer and the other nodes reach it`);
    configs.push(config);
  }
  if (configs.length !== nodes.length) return configs;
  const ids = configs.map((c) => c.cluster!.nodeId);
  t.equal(new Set(ids).size, ids.length, `node ids are unique (${ids.join(', ')})`);
  const internal = configs.map((c) => `${c.cluster!.internalAddress}:${c.cluster!.internalPort}`);
  t.equal(new Set(internal).size, internal.length, `internal addresses are unique (${internal.join(', ')})`);
  for (const config of configs.slice(1))
    t.same(shared(config), shared(configs[0]!), `${config.cluster!.nodeId}: the shared settings are the same as ${ids[0]}'s`);
  return configs;
}

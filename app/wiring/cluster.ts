import type { Config } from '../../runtime/config.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import type { Metrics } from '../../runtime/metrics/index.ts';
import type { RecoveryTask } from '../../runtime/recovery.ts';
import { InFlightCounter } from '../../runtime/in-flight.ts';
import { ClusterNode } from '../../runtime/cluster/cluster-node.ts';
import { ShardHost } from '../../runtime/cluster/shard-host.ts';
import { ClusterRouting } from '../../runtime/cluster/routing.ts';
import { ShardOwners } from '../../runtime/cluster/shard-owners.ts';
import type { Database } from '../../persistence/database.ts';
import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import { ownerOfShard } from '../../persistence/stores/owners.ts';
import type { OwnedShards } from '../../persistence/cluster/shard-sql.ts';
import { jobsInFlightByShard } from '../../actors/generation/in-flight-by-shard.ts';
import { HeldJobs } from '../../actors/generation/held-jobs.ts';
import type { RenewalScheduler } from '../../actors/billing/renewals.ts';
import type { Databases } from './persistence.ts';

export interface ClusterMembership {
  settings: NonNullable<Config['cluster']>;
  node: ClusterNode;
  shardHost: ShardHost;
  /** Jobs recovered during the emergency stop and held at no provider: a drain does not wait for them. */
  heldJobs: HeldJobs;
  /** Webhook attempts on the wire, by workspace: a shard's drain waits for its own. */
  webhookAttempts: InFlightCounter;
  /** The shards this node owns now, for the work each node does on its own shards only. */
  ownedNow: () => OwnedShards;
}

/** What the shard host does with the actors, which are built after it (they run under its ownership). */
export interface ShardWork {
  recoverShard: (scope: { shard: number; shardCount: number }) => RecoveryTask[];
  retire: (matches: (workspaceId: string) => boolean, drainMs: number) => Promise<number>;
}

/**
 * Cluster mode: the node and the shard host, made but not joined (the node joins once listening, in
 * recovery). Each shard the node gains recovers that shard's work only; actors run only for the
 * workspaces of owned shards. Undefined outside cluster mode.
 */
export function buildClusterMembership(
  config: Config,
  logger: Logger,
  databases: Databases,
  writer: GroupCommitWriter,
  work: ShardWork,
): ClusterMembership | undefined {
  const cluster = config.cluster;
  const { db, membershipDb } = databases;
  if (!cluster || !membershipDb) return undefined;
  const heldJobs = new HeldJobs();
  const webhookAttempts = new InFlightCounter();
  const shardHost = new ShardHost({
    shardCount: cluster.shards,
    logger,
    drainMs: config.shutdownTimeoutMs,
    retryMs: cluster.heartbeatMs,
    recoverShard: work.recoverShard,
    retire: work.retire,
    jobsInFlight: jobsInFlightByShard(db, cluster.shards, { held: heldJobs }),
    shardLost: (matches) => heldJobs.forget(matches),
    attemptsInFlight: (matches) => webhookAttempts.count(matches),
    flushWrites: () => writer.flush(),
  });
  const node = new ClusterNode({
    db: membershipDb,
    nodeId: cluster.nodeId,
    address: `${cluster.internalAddress}:${cluster.internalPort}`,
    shardCount: cluster.shards,
    heartbeatMs: cluster.heartbeatMs,
    deadAfterMs: cluster.deadAfterMs,
    leaseMs: cluster.leaseMs,
    logger,
    drain: shardHost.drain,
  });
  const ownedNow = () => ({ shards: node.ownedShards().map((lease) => lease.shard), shardCount: cluster.shards });
  return { settings: cluster, node, shardHost, heldJobs, webhookAttempts, ownedNow };
}

/**
 * Wires the node to the shard host, the renewals and the metrics, and answers the routing of requests to
 * shard owners. Its stop, right after the HTTP drain, drains each shard (mailboxes emptied, writes flushed,
 * actors stopped) and hands it over before the actors stop.
 */
export function joinCluster(
  stack: CleanupStack,
  membership: ClusterMembership,
  db: Database,
  renewals: RenewalScheduler,
  metrics: Metrics | undefined,
  logger: Logger,
): ClusterRouting {
  const { node, shardHost } = membership;
  shardHost.attach(node);
  // A lost shard's renewal timers go with it: its next owner scheduled them when it gained the shard.
  node.on('lost', (lease) => renewals.cancelWhere((workspaceId) => shardHost.shardOf(workspaceId) === lease.shard));
  if (metrics) {
    metrics.cluster.observe(() => node.ownedShards().length);
    node.on('gained', () => metrics.cluster.gained());
    node.on('lost', (_lease, reason) => metrics.cluster.lost(String(reason)));
  }
  const owners = new ShardOwners((shard) => ownerOfShard(db, shard));
  owners.attach(node);
  stack.defer(() =>
    node
      .stop()
      .catch((error: unknown) => logger.error({ err: error }, 'shutdown: leaving the cluster failed; the others take its shards once its leases expire')),
  );
  return new ClusterRouting(owners, node, shardHost, membership.settings.secret);
}

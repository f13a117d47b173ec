import type { PGlite } from '@electric-sql/pglite';
import type { Config } from '../../runtime/config.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import type { Telemetry } from '../../runtime/telemetry-sdk.ts';
import type { Metrics } from '../../runtime/metrics/index.ts';
import { openDatabase, type Database } from '../../persistence/database.ts';
import { availabilityOf } from '../../persistence/availability.ts';
import { GroupCommitWriter } from '../../persistence/group-commit.ts';
import { fenceShards } from '../../persistence/cluster/fence.ts';
import { StartupError } from './startup-error.ts';

/** Connections of the cluster node's own pool (rounds run one at a time; handovers beside them). */
const MEMBERSHIP_POOL = 3;

export interface Databases {
  db: Database;
  /**
   * Cluster mode: the cluster node's heartbeats and lease statements have connections of their own: queued
   * behind the loads of thousands of actors (a shard just gained), they could be late past CLUSTER_DEAD_AFTER_MS.
   */
  membershipDb: Database | undefined;
}

/** The database (migrated), and in cluster mode the membership pool; closed last but for tracing. */
export async function buildDatabases(stack: CleanupStack, config: Config, pglite: PGlite | undefined): Promise<Databases> {
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, pglite, migrate: config.migrateAtStart ? true : 'check' });
  stack.defer(() => db.close());
  let membershipDb: Database | undefined;
  if (config.cluster) {
    try {
      membershipDb = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMax: MEMBERSHIP_POOL, migrate: false });
    } catch (error) {
      throw new StartupError(`database (the cluster node's connections): ${(error as Error).message}`);
    }
    const opened = membershipDb;
    stack.defer(() => opened.close());
  }
  // Before the database closes, whatever still waits for it to come back is let go.
  stack.defer(() => availabilityOf(db).close());
  return { db, membershipDb };
}

/**
 * The group-commit writer. Closed once the actors have stopped: writes still waiting for an unreachable
 * database are given up then (the next start recovers their jobs).
 */
export function buildWriter(stack: CleanupStack, config: Config, db: Database, telemetry: Telemetry, metrics: Metrics | undefined): GroupCommitWriter {
  const cluster = config.cluster;
  // Cluster mode: every batch of actor writes is fenced on the shard leases its actors run under.
  const fence = cluster
    ? (em: Parameters<typeof fenceShards>[0], claims: Parameters<typeof fenceShards>[2]) =>
        fenceShards(em, cluster.nodeId, claims, { holdLimitMs: cluster.leaseMs })
    : undefined;
  const writer = new GroupCommitWriter(db, {
    windowMs: config.groupCommit.windowMs,
    maxBatch: config.groupCommit.maxBatch,
    tracer: telemetry.tracer,
    fence,
    onCommit: metrics && ((size, seconds) => metrics.persistence.committed(size, seconds)),
  });
  stack.defer(() => writer.close());
  return writer;
}

import { createHash } from 'node:crypto';

/** Shards in a cluster unless CLUSTER_SHARDS says otherwise. Every node of a cluster must use the same count. */
export const DEFAULT_SHARD_COUNT = 64;

/**
 * The shard a workspace's actors live in: the first four bytes of SHA-256(workspace id) as an unsigned
 * number, modulo the shard count. Stable across processes, versions and machines (no seeded hash), and the
 * same as persistence/cluster/shard-sql.ts computes in SQL.
 */
export function shardOf(workspaceId: string, shardCount: number): number {
  if (!Number.isInteger(shardCount) || shardCount < 1) throw new RangeError(`shard count must be a positive integer, not ${shardCount}`);
  return createHash('sha256').update(workspaceId, 'utf8').digest().readUInt32BE(0) % shardCount;
}

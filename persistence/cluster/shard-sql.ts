/**
 * The shard of a workspace, as SQL over a column holding its id: the first four bytes of the SHA-256 of
 * its UTF-8 text, as an unsigned 32-bit number, modulo the shard count (bound as the one `?` parameter).
 * runtime/cluster/shard.ts computes the same in JavaScript; a test pins that both agree. For statements
 * that select one shard's rows (recovery of a shard), e.g. `where ${shardOfSql('workspace_id')} = ?`.
 */
export function shardOfSql(column: string): string {
  if (!/^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$/.test(column)) throw new Error(`not a column name: ${column}`);
  return `(('x' || encode(substr(sha256(convert_to(${column}, 'UTF8')), 1, 4), 'hex'))::bit(32)::bigint % ?::int4)::int4`;
}

/** Cluster mode: the shards this node owns now; periodic clean-ups touch only their workspaces' rows. */
export interface OwnedShards {
  shards: number[];
  shardCount: number;
}

/**
 * ` and <the column's shard is one of owned's>` and its parameters, to append to a where clause; nothing
 * without `owned` (a single node owns every workspace).
 */
export function ownedShardsSql(column: string, owned: OwnedShards | undefined): { sql: string; params: unknown[] } {
  if (!owned) return { sql: '', params: [] };
  return {
    sql: ` and ${shardOfSql(column)} in (select value::int4 from jsonb_array_elements_text(?::jsonb))`,
    params: [owned.shardCount, JSON.stringify(owned.shards)],
  };
}

/** Cluster mode: one shard's workspaces (the shard just gained, whose work is recovered). */
export interface ShardScope {
  shard: number;
  shardCount: number;
}

/** The condition and parameters that keep a statement to one shard's workspaces (none without a scope). */
export function shardCondition(column: string, scope: ShardScope | undefined): { sql: string; params: number[] } {
  return scope ? { sql: ` and ${shardOfSql(column)} = ?`, params: [scope.shardCount, scope.shard] } : { sql: '', params: [] };
}

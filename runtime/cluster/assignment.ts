/**
 * Where each shard should live, given the live nodes and the shards' current owners: an even spread (each
 * node gets ⌊shards/nodes⌋ or one more) that moves as few shards as possible. Every node computes it from
 * the same table rows, so they agree without talking; the result only says where a shard should go, the
 * leases decide where it is.
 *
 * Like Akka's least-shard allocation: a shard stays with a live owner that is within its quota; the
 * nodes holding the most keep the larger quotas; orphaned and surplus shards go to the nodes furthest below
 * theirs. The number moved is then the least possible: the orphans plus each node's surplus.
 *
 * @param owners current owner of shard i at index i (undefined: free, expired or owned by a dead node)
 * @returns the target owner of shard i at index i; all undefined when no node is live
 */
export function assignShards(shardCount: number, liveNodes: readonly string[], owners: readonly (string | undefined)[]): (string | undefined)[] {
  const nodes = [...new Set(liveNodes)].sort();
  if (nodes.length === 0) return Array.from({ length: shardCount }, () => undefined);

  const live = new Set(nodes);
  const held = new Map(nodes.map((node) => [node, 0]));
  for (let shard = 0; shard < shardCount; shard++) {
    const owner = owners[shard];
    if (owner !== undefined && live.has(owner)) held.set(owner, held.get(owner)! + 1);
  }

  const base = Math.floor(shardCount / nodes.length);
  const larger = shardCount % nodes.length;
  const byHeldDesc = [...nodes].sort((a, b) => held.get(b)! - held.get(a)! || (a < b ? -1 : 1));
  const quota = new Map(byHeldDesc.map((node, rank) => [node, base + (rank < larger ? 1 : 0)]));

  const target: (string | undefined)[] = Array.from({ length: shardCount }, () => undefined);
  const kept = new Map(nodes.map((node) => [node, 0]));
  const homeless: number[] = [];
  for (let shard = 0; shard < shardCount; shard++) {
    const owner = owners[shard];
    if (owner !== undefined && live.has(owner) && kept.get(owner)! < quota.get(owner)!) {
      target[shard] = owner;
      kept.set(owner, kept.get(owner)! + 1);
    } else {
      homeless.push(shard);
    }
  }

  for (const shard of homeless) {
    let best: string | undefined;
    let bestRoom = 0;
    for (const node of nodes) {
      const room = quota.get(node)! - kept.get(node)!;
      if (room > bestRoom) {
        best = node;
        bestRoom = room;
      }
    }
    // Quotas add up to shardCount, so some node always has room.
    target[shard] = best!;
    kept.set(best!, kept.get(best!)! + 1);
  }
  return target;
}

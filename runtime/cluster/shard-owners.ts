import type { ShardOwnerRow } from '../../persistence/cluster/leases.ts';
import { systemClock, type Clock } from '../clock.ts';
import type { ClusterNode, KnownOwner } from './cluster-node.ts';

/** A shard's owner as far as this node knows: which node, where to reach it, at which epoch. */
export interface ShardOwner {
  nodeId: string;
  address: string;
  epoch: number;
}

/** Reads a shard's owner from the database (persistence/cluster/leases.ts `ownerAddressOf`). */
export type OwnerLookup = (shard: number) => Promise<ShardOwnerRow | undefined>;

/**
 * Who owns each shard, kept in memory for routing: requests for a workspace another node runs are
 * forwarded without a database read each. Filled from what the ClusterNode reads at every round (the
 * whole lease table, replaced each time) and, between rounds, by reading one shard when it is not known;
 * an entry is trusted only until its lease, as read, would expire unrenewed.
 *
 * Being wrong costs a retry, never a double execution: a forwarded request is never forwarded again,
 * and a node that does not own the shard answers it 503 (`Retry-After: 1`), as a node that owns it checks
 * its lease before every actor message and fences every write. So an entry is dropped as soon as a
 * forward to its node fails or is answered 503 (`forget`), and the next request reads the database.
 * A shard without a live owner (failover under way) is never remembered: each request looks again.
 */
export class ShardOwners {
  private known = new Map<number, KnownOwner>();
  /** One read per shard at a time; the requests that arrive meanwhile wait for it. */
  private readonly reading = new Map<number, Promise<ShardOwner | undefined>>();
  /** Changes when the whole view is replaced, or a shard's entry is dropped: a read begun before must not write over it. */
  private generation = 0;
  private readonly dropped = new Map<number, number>();

  constructor(
    private readonly lookup: OwnerLookup,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Takes each round's view of the owners, and forgets a shard as soon as this node loses it. */
  attach(node: ClusterNode): void {
    node.on('owners', (owners) => this.replace(owners));
    node.on('lost', (lease) => this.forget(lease.shard));
  }

  /** Replaces everything known with a fresh view of every shard (a round's). */
  replace(owners: ReadonlyMap<number, KnownOwner>): void {
    this.known = new Map(owners);
    this.generation++;
    this.dropped.clear();
  }

  /** The shard's owner: from memory while its lease as read is still running, else from the database. */
  ownerOf(shard: number): ShardOwner | undefined | Promise<ShardOwner | undefined> {
    const entry = this.known.get(shard);
    if (entry !== undefined) {
      if (entry.validUntil > this.clock.now()) return entry;
      this.known.delete(shard);
    }
    return this.reading.get(shard) ?? this.read(shard);
  }

  /**
   * Drops what is known of the shard's owner (only if it still names nodeId, when given): a forward to it
   * failed, or it answered that it does not run the workspace. The next request reads the database.
   */
  forget(shard: number, nodeId?: string): void {
    const entry = this.known.get(shard);
    if (entry !== undefined && nodeId !== undefined && entry.nodeId !== nodeId) return;
    this.known.delete(shard);
    this.dropped.set(shard, (this.dropped.get(shard) ?? 0) + 1);
    // A read begun before may answer the same node: the next request starts its own.
    this.reading.delete(shard);
  }

  /** How many shards have an owner in memory (expired entries included until asked for). */
  get size(): number {
    return this.known.size;
  }

  private read(shard: number): Promise<ShardOwner | undefined> {
    const generation = this.generation;
    const dropped = this.dropped.get(shard) ?? 0;
    const sentAt = this.clock.now();
    const reading = this.lookup(shard)
      .then((row) => {
        if (row === undefined) return undefined;
        const owner = { nodeId: row.nodeId, address: row.address, epoch: row.epoch };
        if (this.generation === generation && (this.dropped.get(shard) ?? 0) === dropped) {
          this.known.set(shard, { ...owner, validUntil: sentAt + row.remainingMs });
        }
        return owner;
      })
      .finally(() => {
        if (this.reading.get(shard) === reading) this.reading.delete(shard);
      });
    this.reading.set(shard, reading);
    return reading;
  }
}

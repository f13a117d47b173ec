import { AsyncLocalStorage } from 'node:async_hooks';
import type { Lease } from './cluster/leases.ts';

/**
 * The shard lease (shard and epoch) under which the current code writes: in cluster mode the actor
 * directory runs each message of an actor whose workspace this node owns inside `withWriteClaim`, and
 * every write queued meanwhile carries that claim to the group-commit writer, which fences the batch on it.
 * A single node sets none, and its writes carry none.
 */
const current = new AsyncLocalStorage<Lease>();

export function withWriteClaim<T>(claim: Lease, work: () => T): T {
  return current.run(claim, work);
}

export function currentWriteClaim(): Lease | undefined {
  return current.getStore();
}

/** The claims of the units of one transaction, one per shard; a shard claimed at two epochs keeps both (the fence refuses the stale one). */
export class WriteClaims {
  private readonly byKey = new Map<string, Lease>();

  add(claim: Lease | undefined): this {
    if (claim) this.byKey.set(`${claim.shard}:${claim.epoch}`, claim);
    return this;
  }

  addAll(other: WriteClaims | undefined): this {
    if (other) for (const claim of other.byKey.values()) this.byKey.set(`${claim.shard}:${claim.epoch}`, claim);
    return this;
  }

  get size(): number {
    return this.byKey.size;
  }

  /** In shard order, as one fence call wants them. */
  sorted(): Lease[] {
    return [...this.byKey.values()].sort((a, b) => a.shard - b.shard || a.epoch - b.epoch);
  }
}

/**
 * Asserts, inside a write transaction, that this node still holds the claimed leases (see
 * persistence/cluster/fence.ts). May answer the transaction's id (`txid_current()`) when it read it in
 * the same round trip, sparing the writer a statement of its own.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a fence that answers nothing (Promise<void>) is as welcome as one that answers the id.
export type WriteFence = (em: import('@mikro-orm/postgresql').SqlEntityManager, claims: Lease[]) => Promise<string | undefined | void>;

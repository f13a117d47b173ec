import type { Lease } from './leases.ts';
import { emOf } from '../stores/orm.ts';
import type { Unit } from '../stores/unit.ts';

/** SQLSTATE raised by `cluster_fence` (migration 0011) when a claimed lease is not held. */
export const FENCED_OUT_SQLSTATE = 'GSF01';

/** A write was refused because its node no longer owns the shard at the epoch the write carries. */
export class FencedOutError extends Error {
  constructor(
    readonly nodeId: string,
    readonly claims: readonly Lease[],
    cause?: unknown,
  ) {
    super(`fenced out: node ${nodeId} no longer owns ${claims.map((c) => `shard ${c.shard} at epoch ${c.epoch}`).join(', ')}`, { cause });
    this.name = 'FencedOutError';
  }
}

export function isFencedOut(error: unknown): boolean {
  if (error instanceof FencedOutError) return true;
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === FENCED_OUT_SQLSTATE;
}

export interface FenceOptions {
  /**
   * How long the transaction may then sit idle (between statements) before the server ends it: a process
   * paused after fencing would otherwise hold back the takeover of its shards until it resumes.
   */
  holdLimitMs: number;
}

/**
 * Asserts, inside the caller's write transaction (em must be the transaction's entity manager), that
 * nodeId owns each claimed shard at the claimed epoch with an unexpired lease; throws FencedOutError
 * otherwise, and the transaction is then aborted in the database (nothing it wrote can commit).
 *
 * Why a `FOR SHARE` lock on the lease row, and not a plain check: a takeover changes the row (new owner,
 * epoch + 1) under a row lock that conflicts with FOR SHARE. So either the takeover committed first, and
 * the fence (re-reading the row once the lock is granted) sees the new epoch and raises; or the fence
 * locked first, and the takeover waits until this transaction has committed or rolled back. A plain read
 * would pass, let the takeover commit and the new owner read, and then commit a stale write behind it.
 * FOR KEY SHARE would not do: it does not conflict with the takeover's UPDATE of non-key columns.
 *
 * Where to call it: anywhere in the transaction is correct; just before commit keeps the lock short, so a
 * takeover waits the least. Claims are locked in shard order; a transaction that writes for several
 * shards passes all of them in one call so that concurrent fences cannot deadlock.
 *
 * Returns the transaction's id (`txid_current()`, read by the same statement); undefined without claims.
 */
export async function fenceShards(unit: Unit, nodeId: string, claims: readonly Lease[], options: FenceOptions): Promise<string | undefined> {
  const em = emOf(unit);
  if (!em.isInTransaction()) throw new Error('fenceShards must run inside the write transaction it guards');
  if (claims.length === 0) return undefined;
  const json = JSON.stringify(claims.map(({ shard, epoch }) => ({ shard, epoch })));
  try {
    // The transaction's id comes back in the same round trip: the group-commit writer needs it before commit
    // (to learn, should the connection drop during COMMIT, whether it committed) and need not ask again.
    const rows = await em.execute<Array<{ id: string }>>('select txid_current()::text as id, cluster_fence(?, ?::jsonb, ?)', [
      nodeId,
      json,
      Math.max(1, Math.round(options.holdLimitMs)),
    ]);
    return rows[0]?.id;
  } catch (error) {
    if (isFencedOut(error)) throw new FencedOutError(nodeId, claims, error);
    throw error;
  }
}

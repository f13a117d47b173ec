import { Lru } from '../../runtime/lru.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';

/** An Idempotency-Key as the workspace actor knows it. */
export interface IdempotencyEntry {
  hash: string;
  /** ms since the epoch; past it the key may be used again for a new request. */
  expiresAt: number;
  /** Set once the first request's generation is committed. */
  result?: { status: number; generation: GenerationRow };
}

/**
 * Completed Idempotency-Keys a workspace actor keeps in memory. The stored key (idempotency_keys) is the
 * record for its 24 hours; memory only saves the lookup when a client retries soon after, so a busy
 * workspace, whose actor never goes idle, keeps this many and not every key of the day.
 */
export const IDEMPOTENCY_CACHE_MAX = 256;

/**
 * A workspace actor's Idempotency-Keys: those of creates in flight (not yet committed, so found nowhere
 * else: always kept, and as few as the creates the plan lets wait) and the most recently used completed
 * ones (bounded; the others are read back from the database).
 */
export class IdempotencyCache {
  private readonly pending = new Map<string, IdempotencyEntry>();
  private readonly done: Lru<string, IdempotencyEntry>;

  constructor(max = IDEMPOTENCY_CACHE_MAX) {
    this.done = new Lru(max);
  }

  /** The key's entry if it is in memory and has not expired at `now`. */
  get(key: string, now: number): IdempotencyEntry | undefined {
    const entry = this.pending.get(key) ?? this.done.get(key);
    if (entry === undefined || entry.expiresAt > now) return entry;
    this.pending.delete(key);
    this.done.delete(key);
    return undefined;
  }

  /** A create with this key was accepted and is being committed. */
  begin(key: string, hash: string, expiresAt: number): void {
    this.done.delete(key);
    this.pending.set(key, { hash, expiresAt });
  }

  /** The create was committed, or a stored key was read back: `entry` has its result. */
  remember(key: string, entry: IdempotencyEntry): void {
    if (!entry.result) return this.begin(key, entry.hash, entry.expiresAt);
    this.pending.delete(key);
    this.done.set(key, entry);
  }

  /** The create failed: the key was not used. */
  forget(key: string): void {
    this.pending.delete(key);
    this.done.delete(key);
  }

  get size(): { pending: number; done: number } {
    return { pending: this.pending.size, done: this.done.size };
  }
}

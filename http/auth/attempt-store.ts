import type { Clock } from '../../runtime/clock.ts';

/** Sign-in attempts of one account from one address since the last success: how many, and when the last was. */
export interface AttemptRecord {
  count: number;
  /** Clock milliseconds of the last attempt. */
  last: number;
}

/** What a change makes of a record: the record to store (none: leave it as it is) and the caller's result. */
export interface AttemptChange<T> {
  next?: AttemptRecord;
  result: T;
}

/**
 * Records of sign-in attempts, one per key, changed atomically: `update` gives the current record to a
 * pure function and stores what it returns, as if nothing else ran in between (so concurrent attempts each
 * see the one before). One interface, two back ends (memory; Redis when REDIS_URL is set, shared by every
 * node), chosen in app/service.ts. Used by login-throttle.ts.
 */
export interface AttemptStore {
  update<T>(key: string, ttlMs: number, change: (current: AttemptRecord | undefined) => AttemptChange<T>): Promise<T>;
  delete(key: string): Promise<void>;
}

/** The store could not apply a change for the contention on its key; the attempt is refused for a moment. */
export class AttemptContentionError extends Error {
  constructor(key: string) {
    super(`too many concurrent changes of ${key}`);
    this.name = 'AttemptContentionError';
  }
}

interface Entry {
  record: AttemptRecord;
  expiresAt: number;
}

/** One process's records; for a single node (no REDIS_URL). */
export class MemoryAttemptStore implements AttemptStore {
  private readonly entries = new Map<string, Entry>();
  private insertsSinceSweep = 0;

  constructor(
    private readonly clock: Clock,
    private readonly sweepEvery = 4096,
  ) {}

  async update<T>(key: string, ttlMs: number, change: (current: AttemptRecord | undefined) => AttemptChange<T>): Promise<T> {
    const now = this.clock.now();
    const entry = this.entries.get(key);
    const current = entry && entry.expiresAt > now ? entry.record : undefined;
    const { next, result } = change(current);
    if (next) {
      if (!entry && ++this.insertsSinceSweep >= this.sweepEvery) this.sweep(now);
      this.entries.set(key, { record: next, expiresAt: now + ttlMs });
    }
    return result;
  }

  async delete(key: string): Promise<void> {
    this.entries.delete(key);
  }

  /** Drops expired records, so memory follows the number of active keys. */
  private sweep(now: number): void {
    this.insertsSinceSweep = 0;
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
  }

  size(): number {
    return this.entries.size;
  }
}

import type { Clock, Timer } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { Database } from '../../persistence/database.ts';
import { addKeyUsage } from '../../persistence/stores/keys.ts';
import { openUnit } from '../../persistence/stores/unit.ts';

export const LAST_USED_EVERY_MS = 60_000;
const FLUSH_EVERY_MS = 5_000;
const DAY_MS = 86_400_000;
/** Rows per statement, to keep statements (and their parameter lists) small. */

export interface KeyUsageOptions {
  db: Database;
  clock: Clock;
  logger: Logger;
  flushEveryMs?: number;
}

/**
 * Counts requests per key and UTC day, and notes when each key was last used, in memory; a timer
 * writes both in a few statements every few seconds, and close() writes what is left. Requests never
 * wait on these writes. lastUsedAt is written at most once a minute per key: this node checks it
 * before queueing the write, and the UPDATE checks it again against the stored value, for other nodes.
 */
export class KeyUsageRecorder {
  private requests = new Map<string, number>();
  private lastUsed = new Map<string, number>();
  /** When this node last queued a lastUsedAt write for a key. */
  private readonly lastUsedQueuedAt = new Map<string, number>();
  private timer: Timer | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly flushEveryMs: number;
  /** The UTC day of the last request, kept so counting does not format a date each time. */
  private dayStart = -Infinity;
  private day = '';

  constructor(private readonly options: KeyUsageOptions) {
    this.flushEveryMs = options.flushEveryMs ?? FLUSH_EVERY_MS;
  }

  /** Counts one request of a key; synchronous and cheap. */
  record(keyId: string): void {
    const now = this.options.clock.now();
    if (now < this.dayStart || now >= this.dayStart + DAY_MS) {
      this.dayStart = Math.floor(now / DAY_MS) * DAY_MS;
      this.day = utcDay(now);
    }
    const slot = `${keyId} ${this.day}`;
    this.requests.set(slot, (this.requests.get(slot) ?? 0) + 1);
    const queuedAt = this.lastUsedQueuedAt.get(keyId);
    if (queuedAt === undefined || now - queuedAt >= LAST_USED_EVERY_MS) {
      this.lastUsedQueuedAt.set(keyId, now);
      this.lastUsed.set(keyId, now);
    }
    this.schedule();
  }

  /** Writes everything counted so far; resolves when it is committed (or has failed and been put back). */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.write());
    return this.flushing;
  }

  /** Stops the timer and writes what is left; called by the service's stop sequence. */
  async close(): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
    this.timer = undefined;
    await this.flush();
  }

  pending(): number {
    return this.requests.size + this.lastUsed.size;
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = this.options.clock.setTimer(() => {
      this.timer = undefined;
      void this.flush();
    }, this.flushEveryMs);
  }

  private async write(): Promise<void> {
    const requests = this.requests;
    const lastUsed = this.lastUsed;
    if (requests.size === 0 && lastUsed.size === 0) return;
    this.requests = new Map();
    this.lastUsed = new Map();
    this.forgetOldQueueTimes();
    try {
      const counts = [...requests].map(([slot, n]) => {
        const [keyId, day] = slot.split(' ') as [string, string];
        return [keyId, day, n] as const;
      });
      await addKeyUsage(openUnit(this.options.db), counts, [...lastUsed]);
    } catch (error) {
      // Put the counts back so the next flush tries again; nothing counted is lost to a transient error.
      for (const [slot, n] of requests) this.requests.set(slot, (this.requests.get(slot) ?? 0) + n);
      for (const [keyId, at] of lastUsed) if (!this.lastUsed.has(keyId)) this.lastUsed.set(keyId, at);
      this.options.logger.warn({ err: error }, 'could not write API key usage; will retry');
      this.schedule();
    }
  }

  private forgetOldQueueTimes(): void {
    const now = this.options.clock.now();
    for (const [keyId, at] of this.lastUsedQueuedAt) if (now - at >= LAST_USED_EVERY_MS) this.lastUsedQueuedAt.delete(keyId);
  }
}

/** `YYYY-MM-DD` of a time, in UTC. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

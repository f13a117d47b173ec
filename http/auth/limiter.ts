import type { Clock } from '../../runtime/clock.ts';

/** The state of one counter's current fixed window, after (or without) counting a hit. */
export interface RateWindow {
  /** False once the window holds more hits than the limit. */
  allowed: boolean;
  limit: number;
  remaining: number;
  /** When the window ends, in clock milliseconds. */
  resetAt: number;
}

/**
 * Fixed-window counters: windows are aligned to multiples of windowMs on the service clock, so every
 * node with a shared back end agrees on them. One interface, two back ends (memory, Redis), chosen in
 * app/service.ts. Used for per-key request limits and for login throttling.
 */
export interface RateLimiter {
  /** Counts one hit against key in its current window (synchronously where the back end allows). */
  hit(key: string, limit: number, windowMs: number): RateWindow | Promise<RateWindow>;
  /** The current window's state, without counting. */
  peek(key: string, limit: number, windowMs: number): Promise<RateWindow>;
  /** Forgets the current window's hits of key. */
  reset(key: string, windowMs: number): Promise<void>;
}

export function windowOf(now: number, windowMs: number): { start: number; resetAt: number } {
  const start = Math.floor(now / windowMs) * windowMs;
  return { start, resetAt: start + windowMs };
}

export function windowState(count: number, limit: number, resetAt: number): RateWindow {
  return { allowed: count <= limit, limit, remaining: Math.max(0, limit - count), resetAt };
}

/** Whole seconds until resetAt, at least 1: the unit of X-RateLimit-Reset and Retry-After. */
export function secondsUntil(resetAt: number, now: number): number {
  return Math.max(1, Math.ceil((resetAt - now) / 1000));
}

interface Counter {
  start: number;
  resetAt: number;
  count: number;
}

/** One process's counters; for a single node (no REDIS_URL). */
export class MemoryRateLimiter implements RateLimiter {
  private readonly counters = new Map<string, Counter>();
  private insertsSinceSweep = 0;

  constructor(
    private readonly clock: Clock,
    private readonly sweepEvery = 4096,
  ) {}

  hit(key: string, limit: number, windowMs: number): RateWindow {
    const now = this.clock.now();
    const { start, resetAt } = windowOf(now, windowMs);
    let counter = this.counters.get(key);
    if (!counter || counter.start !== start) {
      counter = { start, resetAt, count: 0 };
      this.counters.set(key, counter);
      if (++this.insertsSinceSweep >= this.sweepEvery) this.sweep(now);
    }
    counter.count++;
    return windowState(counter.count, limit, resetAt);
  }

  async peek(key: string, limit: number, windowMs: number): Promise<RateWindow> {
    const { start, resetAt } = windowOf(this.clock.now(), windowMs);
    const counter = this.counters.get(key);
    return windowState(counter && counter.start === start ? counter.count : 0, limit, resetAt);
  }

  async reset(key: string): Promise<void> {
    this.counters.delete(key);
  }

  /** Drops counters whose window has passed, so memory follows the number of active keys. */
  private sweep(now: number): void {
    this.insertsSinceSweep = 0;
    for (const [key, counter] of this.counters) if (counter.resetAt <= now) this.counters.delete(key);
  }

  size(): number {
    return this.counters.size;
  }
}

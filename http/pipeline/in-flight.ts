/**
 * The requests being handled, counted so that a stop can wait for the last answer. Live streams are not
 * counted: they end when the hub closes them, not when their request is answered.
 */
export class InFlight {
  private count = 0;
  private idleWaiters: Array<() => void> = [];

  get size(): number {
    return this.count;
  }

  started(): void {
    this.count++;
  }

  /** One request answered (or given up); bound, so that a request's promise can take it as its callback. */
  readonly finished = (): void => {
    this.count--;
    if (this.count === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const wake of waiters) wake();
    }
  };

  /** Resolves when no request is being handled. */
  idle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

/** Time and timers come from here, never from Date or setTimeout directly, so tests can move time. */
export interface Clock {
  now(): number;
  setTimer(fn: () => void, delayMs: number): Timer;
}

export interface Timer {
  cancel(): void;
}

/**
 * Resolves after delayMs on this clock: real time on the system clock, on a manual clock when a test advances
 * it that far. For the waits of polls and retry backoffs. Unlike a timer of setTimer, a sleep on the system
 * clock keeps the process alive: someone awaits it.
 */
export function sleep(clock: Pick<Clock, 'setTimer'>, delayMs: number): Promise<void> {
  if (clock === systemClock) return new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(delayMs, 2_147_483_647))));
  return new Promise((resolve) => clock.setTimer(resolve, delayMs));
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, delayMs) {
    const handle = setTimeout(fn, Math.max(0, Math.min(delayMs, 2_147_483_647)));
    handle.unref?.();
    return { cancel: () => clearTimeout(handle) };
  },
};

interface PendingTimer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/** A clock that only moves when told to; due timers fire in time order as it advances. */
export class ManualClock implements Clock {
  private timers: PendingTimer[] = [];
  private seq = 0;

  constructor(private current = Date.UTC(2026, 0, 1)) {}

  now(): number {
    return this.current;
  }

  setTimer(fn: () => void, delayMs: number): Timer {
    const timer: PendingTimer = { at: this.current + Math.max(0, delayMs), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }

  /** Moves time forward by ms, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      this.timers = this.timers.filter((t) => !t.cancelled);
      const due = this.timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.current = Math.max(this.current, due.at);
      due.cancelled = true;
      due.fn();
    }
    this.current = target;
  }

  pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }
}

import { FastCounter, type Instruments } from './instruments.ts';

/** The gauge's value per state: ordered by how much traffic the deployment gets (docs/routing.md). */
export const BREAKER_STATE_VALUES = { closed: 0, half_open: 1, open: 2 } as const;
export type BreakerStateName = keyof typeof BREAKER_STATE_VALUES;

/** A scrape does not wait longer than this for the breakers' store (Redis): the gauge is left out of that one. */
const READ_DEADLINE_MS = 2_000;

/** Where the gauge reads the breakers from, when metrics are collected (the shared store, so every node shows one state). */
export type BreakerStates = () => Promise<Array<{ deploymentId: string; status: BreakerStateName }>>;

/** The circuit breakers of provider deployments: each one's state (a gauge) and the transitions this node made (a counter). */
export class BreakerMetrics {
  private readonly transitions: FastCounter<Record<string, string>>;
  private source: BreakerStates | undefined;

  constructor(instruments: Instruments, onError: (error: unknown) => void = () => {}) {
    this.transitions = new FastCounter(instruments, 'gs.breaker.transitions', {
      description: 'Circuit breaker state changes made by this node, by deployment, state left and state entered.',
      unit: '{transition}',
    });
    const gauge = instruments.meter.createObservableGauge('gs.breaker.state', {
      description: "Each provider deployment's circuit breaker: 0 closed, 1 half-open, 2 open.",
      unit: '1',
    });
    gauge.addCallback(async (result) => {
      if (!this.source) return;
      try {
        for (const { deploymentId, status } of await withDeadline(this.source()))
          result.observe(BREAKER_STATE_VALUES[status], { 'gs.deployment': deploymentId });
      } catch (error) {
        onError(error);
      }
    });
  }

  /** The breakers' states, read at each collection (the service calls this once the breakers exist). */
  observe(source: BreakerStates): void {
    this.source = source;
  }

  transition(deploymentId: string, from: BreakerStateName, to: BreakerStateName): void {
    this.transitions.add(1, `${deploymentId}\n${from}\n${to}`, () => ({ 'gs.deployment': deploymentId, 'gs.breaker.from': from, 'gs.breaker.to': to }));
  }
}

function withDeadline<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the breakers took longer than ${READ_DEADLINE_MS} ms to read`)), READ_DEADLINE_MS);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

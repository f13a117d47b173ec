import {
  admit,
  closedBreaker,
  recordOutcome,
  viewOf,
  type Admission,
  type BreakerRecord,
  type BreakerSettings,
  type BreakerView,
  type Transition,
  type Verdict,
} from './breaker.ts';

/**
 * Where breakers are kept: one operation per call, atomic for its deployment. The memory backend serves one
 * node; the Redis one (redis-breaker-store.ts) a cluster, so every node sees one state and one half-open ticket.
 */
export interface BreakerBackend {
  readonly kind: 'memory' | 'redis';
  admit(deploymentId: string, now: number, settings: BreakerSettings, ticket: string): Promise<{ admission: Admission; transition?: Transition }>;
  record(
    deploymentId: string,
    verdict: Verdict,
    now: number,
    settings: BreakerSettings,
    ticket: string | undefined,
    eventId: string,
  ): Promise<Transition | undefined>;
  read(deploymentIds: readonly string[], now: number, settingsOf: (deploymentId: string) => BreakerSettings): Promise<BreakerView[]>;
}

/** One node's breakers, in a map: the pure machine applied as it is. */
export class MemoryBreakerBackend implements BreakerBackend {
  readonly kind = 'memory';
  private readonly records = new Map<string, BreakerRecord>();

  async admit(deploymentId: string, now: number, settings: BreakerSettings, ticket: string): Promise<{ admission: Admission; transition?: Transition }> {
    const step = admit(this.records.get(deploymentId) ?? closedBreaker(), now, settings, ticket);
    this.records.set(deploymentId, step.record);
    return { admission: step.result, transition: step.transition };
  }

  async record(deploymentId: string, verdict: Verdict, now: number, settings: BreakerSettings, ticket: string | undefined): Promise<Transition | undefined> {
    const step = recordOutcome(this.records.get(deploymentId) ?? closedBreaker(), verdict, now, settings, ticket);
    this.records.set(deploymentId, step.record);
    return step.transition;
  }

  async read(deploymentIds: readonly string[], now: number, settingsOf: (deploymentId: string) => BreakerSettings): Promise<BreakerView[]> {
    return deploymentIds.map((id) => viewOf(this.records.get(id) ?? closedBreaker(), now, settingsOf(id)));
  }
}

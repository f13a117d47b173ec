import type { Counter } from '@opentelemetry/api';
import { AttributeCache, type Instruments } from './instruments.ts';

/** Cluster mode: shards this node owns (observed) and shards gained or lost (counted, with the reason of a loss). */
export class ClusterMetrics {
  private readonly changes: Counter;
  private readonly attributes = new AttributeCache<Record<string, string>>();
  private owned: (() => number) | undefined;

  constructor({ meter }: Instruments) {
    this.changes = meter.createCounter('gs.cluster.shard.handovers', {
      description: 'Shards this node gained or lost, by direction (gained, lost) and, for a loss, its reason (handed-over, released, lease-lost, expelled).',
      unit: '{shard}',
    });
    const gauge = meter.createObservableGauge('gs.cluster.shards.owned', { description: 'Shards this node holds the lease of.', unit: '{shard}' });
    gauge.addCallback((result) => {
      if (this.owned) result.observe(this.owned());
    });
  }

  observe(owned: () => number): void {
    this.owned = owned;
  }

  gained(): void {
    this.changes.add(
      1,
      this.attributes.get('gained', () => ({ 'gs.direction': 'gained' })),
    );
  }

  lost(reason: string): void {
    this.changes.add(
      1,
      this.attributes.get(`lost ${reason}`, () => ({ 'gs.direction': 'lost', 'gs.reason': reason })),
    );
  }
}

import type { Counter } from '@opentelemetry/api';
import { AttributeCache, type Instruments } from './instruments.ts';

export type CatalogReloadOutcome = 'applied' | 'unchanged' | 'refused';

/**
 * The catalog: the version this node serves (a gauge of 1 labelled with it: one series per node, the version
 * served now, none of the ones before it) and its reloads by outcome (applied, unchanged, refused).
 */
export class CatalogMetrics {
  private readonly reloads: Counter;
  private readonly attributes = new AttributeCache<Record<string, string>>();
  private version: (() => string) | undefined;

  constructor({ meter, snapshots }: Instruments) {
    this.reloads = meter.createCounter('gs.catalog.reloads', {
      description:
        'Catalog file reloads, by outcome: applied (a new version served), unchanged (the same catalog or the same refused file), refused (invalid: the old catalog stays).',
      unit: '{reload}',
    });
    snapshots.gauge('gs.catalog.version', { description: 'The catalog version this node serves (1, labelled gs.version).', unit: '1' }, () =>
      this.version ? [{ value: 1, attributes: { 'gs.version': this.version() } }] : [],
    );
  }

  observe(version: () => string): void {
    this.version = version;
  }

  reloaded(outcome: CatalogReloadOutcome): void {
    this.reloads.add(
      1,
      this.attributes.get(outcome, () => ({ 'gs.outcome': outcome })),
    );
  }
}

import type { Counter } from '@opentelemetry/api';
import { AttributeCache, type Instruments } from './instruments.ts';

/** The catalog: the version this node serves (a gauge of 1 labelled with it) and its reloads by outcome (applied, refused). */
export class CatalogMetrics {
  private readonly reloads: Counter;
  private readonly attributes = new AttributeCache<Record<string, string>>();
  private version: (() => string) | undefined;

  constructor({ meter }: Instruments) {
    this.reloads = meter.createCounter('gs.catalog.reloads', {
      description: 'Catalog file reloads, by outcome: applied (a new version served), unchanged, refused (invalid: the old catalog stays).',
      unit: '{reload}',
    });
    const gauge = meter.createObservableGauge('gs.catalog.version', {
      description: 'The catalog version this node serves (1, labelled gs.version).',
      unit: '1',
    });
    gauge.addCallback((result) => {
      if (this.version) result.observe(1, { 'gs.version': this.version() });
    });
  }

  observe(version: () => string): void {
    this.version = version;
  }

  reloaded(outcome: 'applied' | 'unchanged' | 'refused'): void {
    this.reloads.add(
      1,
      this.attributes.get(outcome, () => ({ 'gs.outcome': outcome })),
    );
  }
}

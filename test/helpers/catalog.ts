import { readCatalogFileSync } from '../../runtime/catalog-source.ts';
import { shippedCatalogFile } from '../../runtime/config.ts';
import type { ModelCatalog } from '../../domain/catalog/index.ts';

/** Provider kinds the service has adapters for. */
export const PROVIDER_KINDS = new Set(['local', 'openai', 'replicate', 'cog', 'fal', 'comfyui']);

/** The catalog the service ships (catalog/default.yaml), as a service with only the local provider builds it. */
export function shippedCatalog(configured: string[] = ['local']): ModelCatalog {
  const read = readCatalogFileSync(shippedCatalogFile(), { knownProviders: PROVIDER_KINDS, configuredProviders: new Set(configured) });
  if (!read.ok) throw new Error(`the shipped catalog is refused: ${read.problems.join('; ')}`);
  return read.catalog;
}

import type { Test } from 'tap';
import { writeCatalogFile } from './provider-service.ts';

/** One model of a catalog file, run by one deployment of a real provider kind. */
export interface ProviderModel {
  id: string;
  mode: string;
  /** Credits per image (image modes) or per job (any other). */
  credits: number;
  parameters: Record<string, Record<string, unknown>>;
  deployment: { id: string; provider: string; target: Record<string, unknown>; input?: Record<string, unknown>; optional?: boolean };
}

/** The free plan of these files: 100 credits, ten jobs at once, a rate limit no test reaches. */
export const PLAN_CREDITS = 100;

/**
 * Writes a catalog file (CATALOG_FILE) of one plan and `models` into a temporary folder, removed when `t`
 * ends, and answers its path: how a service-level test points the service at a provider's fake.
 */
export function providerCatalogFile(t: Test, models: ProviderModel[]): string {
  const plan = {
    id: 'free',
    name: 'Free',
    monthlyPriceCents: 0,
    monthlyCredits: PLAN_CREDITS,
    centsPerCredit: 5,
    concurrentJobs: 10,
    storageBytes: 1e9,
    maxFileBytes: 1e7,
    requestsPerMinute: 6000,
  };
  return writeCatalogFile(
    t,
    plan,
    models.map((m) => ({
      id: m.id,
      mode: m.mode,
      price: { per: m.mode.endsWith('_image') ? 'image' : 'job', credits: m.credits },
      parameters: m.parameters,
      deployments: [m.deployment],
    })),
  );
}

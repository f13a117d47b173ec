import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';

/** One model of a catalog file, run by one deployment of a real provider kind. */
export interface ProviderModel {
  id: string;
  mode: string;
  /** Credits per image (image modes) or per job (any other). */
  credits: number;
  parameters: Record<string, Record<string, unknown>>;
  deployment: { id: string; provider: string; target: Record<string, unknown>; input?: Record<string, unknown> };
}

/** The free plan of these files: 100 credits, ten jobs at once, a rate limit no test reaches. */
export const PLAN_CREDITS = 100;

/**
 * Writes a catalog file (CATALOG_FILE) of one plan and `models` into a temporary folder, removed when `t`
 * ends, and answers its path: how a service-level test points the service at a provider's fake.
 */
export function providerCatalogFile(t: Test, models: ProviderModel[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'gs-catalog-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'catalog.json');
  writeFileSync(
    file,
    JSON.stringify({
      defaultPlan: 'free',
      plans: [
        {
          id: 'free',
          name: 'Free',
          monthlyPriceCents: 0,
          monthlyCredits: PLAN_CREDITS,
          centsPerCredit: 5,
          concurrentJobs: 10,
          storageBytes: 1e9,
          maxFileBytes: 1e7,
          requestsPerMinute: 6000,
        },
      ],
      models: models.map((m) => ({
        id: m.id,
        name: m.id,
        mode: m.mode,
        maker: m.id.split('/')[0],
        description: `${m.id} on ${m.deployment.provider}.`,
        price: { per: m.mode.endsWith('_image') ? 'image' : 'job', credits: m.credits },
        plans: ['free'],
        parameters: m.parameters,
        sample: { prompt: 'x', note: 'n' },
        deployments: [m.deployment],
      })),
    }),
  );
  return file;
}

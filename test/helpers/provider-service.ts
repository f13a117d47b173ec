import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import type { TestServer } from './server.ts';
import { withKey } from './identity.ts';

/**
 * What the service-level tests of real providers share: a catalog file naming their deployments, the one
 * plan every workspace is on, and an output read back as a client reads it (a download link, then its bytes).
 */

/** The only plan of the test catalogs: enough credits and requests that neither limit is what a test meets. */
export const TEST_PLAN = {
  id: 'studio',
  name: 'Studio',
  monthlyPriceCents: 0,
  monthlyCredits: 1_000,
  centsPerCredit: 5,
  concurrentJobs: 10,
  storageBytes: 1e9,
  maxFileBytes: 1e7,
  uploadMediaTypes: ['image'],
  requestsPerMinute: 6_000,
};

/** Credits a new workspace starts with on TEST_PLAN. */
export const STARTING_CREDITS = TEST_PLAN.monthlyCredits;

export interface TestModel {
  id: string;
  mode: string;
  price: Record<string, unknown>;
  parameters: Record<string, Record<string, unknown>>;
  deployments: Array<Record<string, unknown>>;
}

/** Writes a catalog of these models on TEST_PLAN to a temporary JSON file (removed when the test ends); answers its path. */
export function writeTestCatalog(t: Test, models: TestModel[]): string {
  return writeCatalogFile(t, TEST_PLAN, models);
}

/** Writes a catalog of one plan and these models (each on that plan) to a temporary JSON file, removed when the test ends. */
export function writeCatalogFile(t: Test, plan: { id: string } & Record<string, unknown>, models: TestModel[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'gs-provider-catalog-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'catalog.json');
  writeFileSync(
    file,
    JSON.stringify({
      defaultPlan: plan.id,
      plans: [plan],
      models: models.map((m) => ({
        name: m.id,
        maker: m.id.split('/')[0],
        description: `${m.id} for the tests.`,
        plans: [plan.id],
        sample: { prompt: 'x', note: 'n' },
        ...m,
      })),
    }),
  );
  return file;
}

/** An output asset's bytes, through GET /v1/assets/{id}/download and the link it answers. */
export async function downloadAsset(server: TestServer, key: string, workspaceId: string, assetId: string): Promise<Buffer> {
  const link = await server.json<{ url: string }>(`/v1/assets/${assetId}/download?workspaceId=${workspaceId}`, { headers: withKey(key) });
  if (link.status !== 200) throw new Error(`download link of ${assetId}: ${link.status} ${JSON.stringify(link.body)}`);
  // A link to the service itself (the local blob store) is followed on the address the test reaches it at: its
  // public BASE_URL may be one that only a proxy in front of it answers.
  const url = new URL(link.body.url);
  const response = url.origin === new URL(server.config.baseUrl).origin ? await server.fetch(`${url.pathname}${url.search}`) : await fetch(url);
  if (response.status !== 200) throw new Error(`download of ${assetId}: ${response.status}`);
  return Buffer.from(await response.arrayBuffer());
}

/** Whether bytes start as an MP3 file does: an ID3v2 tag, or an MPEG audio frame sync. */
export function looksLikeMp3(bytes: Buffer): boolean {
  return bytes.subarray(0, 3).toString('latin1') === 'ID3' || (bytes[0] === 0xff && (bytes[1]! & 0xe0) === 0xe0);
}

/** A data URL of bytes, as a create's `inputs.imageUrls` takes one. */
export function dataUrl(contentType: string, bytes: Buffer): string {
  return `data:${contentType};base64,${bytes.toString('base64')}`;
}

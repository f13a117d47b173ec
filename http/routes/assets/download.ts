import { defineRoute } from '../../route.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openAsset } from './access.ts';
import { AssetParams, AssetQuery, DownloadOut } from './shapes.ts';

/** Download URLs work for 5 minutes (docs/assets.md, Assets). */
export const DOWNLOAD_URL_TTL_SECONDS = 5 * 60;

export const getAssetDownload = defineRoute({
  method: 'GET',
  path: '/v1/assets/:id/download',
  operationId: 'getAssetDownload',
  summary: "A short-lived URL (5 minutes) to download the asset's bytes, needing no credentials",
  description: "Answers a short-lived URL (5 minutes) from which the asset's bytes can be downloaded without credentials.",
  tags: ['assets'],
  access: { scopes: ['assets.read'] },
  params: AssetParams,
  query: AssetQuery,
  responses: { 200: DownloadOut },
  handler: async ({ auth, params, query, services }) => {
    const asset = await openAsset(openUnit(services.db), auth, params.id, query.workspaceId);
    const presigned = await services.blobs.presignDownload(asset.storageKey, {
      contentType: asset.contentType,
      filename: asset.name ?? undefined,
      expiresInSeconds: DOWNLOAD_URL_TTL_SECONDS,
    });
    return { headers: { 'Cache-Control': 'no-store' }, body: { url: presigned.url, expiresAt: presigned.expiresAt.toISOString() } };
  },
});

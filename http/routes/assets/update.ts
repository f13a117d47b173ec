import { defineRoute } from '../../route.ts';
import { AssetEntity, type Asset } from '../../../persistence/entities/asset.ts';
import { openAsset } from './access.ts';
import { AssetOut, AssetParams, AssetPatch, toAssetOut } from './shapes.ts';

export const updateAsset = defineRoute({
  method: 'PATCH',
  path: '/v1/assets/:id',
  operationId: 'updateAsset',
  summary: 'Mark an asset favourite (or not) and rename it',
  description: 'Marks an asset as favourite or not, and renames it (null clears the name).',
  tags: ['assets'],
  access: { scopes: ['files.write'] },
  params: AssetParams,
  body: AssetPatch,
  responses: { 200: AssetOut },
  handler: async ({ auth, params, body, services }) => {
    const em = services.db.em();
    const asset = await openAsset(em, auth, params.id, body.workspaceId);
    const changes: Partial<Asset> = { updatedAt: new Date(services.clock.now()) };
    if (body.favorite !== undefined) changes.favorite = body.favorite;
    if (body.name !== undefined) changes.name = body.name === null ? null : body.name.trim();
    await em.nativeUpdate(AssetEntity, { id: asset.id, workspaceId: asset.workspaceId }, changes);
    return { body: toAssetOut({ ...asset, ...changes }) };
  },
});

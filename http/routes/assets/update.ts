import { defineRoute } from '../../route.ts';
import { updateAssetRow, type Asset } from '../../../persistence/stores/files.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
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
    const unit = openUnit(services.db);
    const asset = await openAsset(unit, auth, params.id, body.workspaceId);
    const changes: Partial<Asset> = { updatedAt: new Date(services.clock.now()) };
    if (body.favorite !== undefined) changes.favorite = body.favorite;
    if (body.name !== undefined) changes.name = body.name === null ? null : body.name.trim();
    await updateAssetRow(unit, asset.workspaceId, asset.id, changes);
    return { body: toAssetOut({ ...asset, ...changes }) };
  },
});

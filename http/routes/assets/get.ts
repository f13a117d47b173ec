import { defineRoute } from '../../route.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openAsset } from './access.ts';
import { AssetOut, AssetParams, AssetQuery, toAssetOut } from './shapes.ts';

export const getAsset = defineRoute({
  method: 'GET',
  path: '/v1/assets/:id',
  operationId: 'getAsset',
  summary: 'One asset of the workspace',
  description: 'Reads one asset. An asset of another workspace answers 404, as a missing one.',
  tags: ['assets'],
  access: { scopes: ['assets.read'] },
  params: AssetParams,
  query: AssetQuery,
  responses: { 200: AssetOut },
  handler: async ({ auth, params, query, services }) => {
    const asset = await openAsset(openUnit(services.db), auth, params.id, query.workspaceId);
    return { body: toAssetOut(asset) };
  },
});

import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { deleteAsset } from '../../../persistence/assets/store.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { openAsset } from './access.ts';
import { AssetParams, AssetQuery } from './shapes.ts';

export const deleteAssetRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/assets/:id',
  operationId: 'deleteAsset',
  summary: 'Delete an asset: its bytes are removed and its storage freed',
  description: 'Deletes an asset: its bytes are removed from storage and the space is freed at once.',
  tags: ['assets'],
  access: { scopes: ['files.write'] },
  params: AssetParams,
  query: AssetQuery,
  responses: { 204: null },
  handler: async ({ auth, params, query, services }) => {
    const unit = openUnit(services.db);
    const asset = await openAsset(unit, auth, params.id, query.workspaceId);
    const removed = await inTransaction(unit, (tx) => deleteAsset(tx, asset.workspaceId, asset.id));
    // A concurrent delete got there first: to this caller it is gone, as after any delete.
    if (!removed) throw new ApiError('not_found', `No asset ${params.id}.`);
    try {
      await services.blobs.delete(removed.storageKey);
    } catch (error) {
      // The row and the storage are already released; a leftover object is logged for the operator.
      services.logger.error({ err: error, storageKey: removed.storageKey }, 'asset deleted but its blob could not be removed');
    }
    return { status: 204 };
  },
});

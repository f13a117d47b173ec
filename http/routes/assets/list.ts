import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { listAssets as listAssetRows } from '../../../persistence/stores/files.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openFilesWorkspace } from './access.ts';
import { AssetOut, MediaTypeName, toAssetOut, WorkspaceIdField } from './shapes.ts';

export const listAssets = defineRoute({
  method: 'GET',
  path: '/v1/assets',
  operationId: 'listAssets',
  summary: "List a workspace's assets, newest first; filters favorite, mediaType, sourceGenerationId",
  description:
    'Lists the assets (uploads and generation outputs) of a workspace, newest first, filtered by favorite, mediaType or sourceGenerationId, with cursor pagination.',
  tags: ['assets'],
  access: { scopes: ['assets.read'] },
  errors: ['not_found'],
  query: Type.Object(
    {
      workspaceId: WorkspaceIdField,
      favorite: Type.Optional(Type.Boolean({ description: 'true: favourites only; false: all but favourites.' })),
      mediaType: Type.Optional(MediaTypeName),
      sourceGenerationId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Outputs of this generation.' })),
      ...PageQueryFields,
    },
    { additionalProperties: false },
  ),
  responses: { 200: Page(AssetOut) },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    await openFilesWorkspace(unit, auth, query.workspaceId);
    const limit = query.limit ?? 20;
    let after: [Date, string] | undefined;
    if (query.cursor) {
      const [createdAt, id] = decodeCursor(query.cursor, ['string', 'string']) as [string, string];
      const at = new Date(createdAt);
      if (Number.isNaN(at.getTime())) throw new ApiError('validation_error', 'query.cursor: is not a cursor this list gave out');
      after = [at, id];
    }
    const { favorite, mediaType, sourceGenerationId } = query;
    const rows = await listAssetRows(unit, query.workspaceId, { favorite, mediaType, sourceGenerationId }, { after, limit: limit + 1 });
    return { body: pageOf(rows, limit, (asset) => [asset.createdAt.toISOString(), asset.id], toAssetOut) };
  },
});

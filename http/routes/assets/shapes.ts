import { Type, type Static } from '@sinclair/typebox';
import { MEDIA_TYPES, type Asset } from '../../../persistence/stores/files.ts';

/** Request and response shapes of assets, and the one mapper from row to Out. */

export const MediaTypeName = Type.Union(
  MEDIA_TYPES.map((type) => Type.Literal(type)),
  { description: 'image, video or audio.' },
);
export const WorkspaceIdField = Type.String({ minLength: 1, maxLength: 64, description: 'The workspace; required with an API key (its own workspace).' });
export const AssetName = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^[^\\u0000-\\u001f\\u007f/\\\\]+$',
  description: 'A display name: 1 to 255 characters, no slashes or control characters.',
});

export const AssetParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'Asset id (ast_…).' }) }, { additionalProperties: false });
/** Routes on one asset take the workspace in the query (API keys must send it; sessions may). */
export const AssetQuery = Type.Object({ workspaceId: Type.Optional(WorkspaceIdField) }, { additionalProperties: false });

export const AssetOut = Type.Object(
  {
    id: Type.String({ description: 'ast_…' }),
    workspaceId: Type.String(),
    mediaType: MediaTypeName,
    contentType: Type.String({ description: 'The checked type of the bytes, e.g. image/png.' }),
    bytes: Type.Integer({ minimum: 0, description: 'Size in bytes.' }),
    width: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], { description: 'Pixels, for images and videos when known.' }),
    height: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
    durationSeconds: Type.Union([Type.Number({ minimum: 0 }), Type.Null()], { description: 'For audio and video when known.' }),
    favorite: Type.Boolean(),
    name: Type.Union([Type.String(), Type.Null()], { description: 'The uploaded file name, or one set with PATCH.' }),
    sourceGenerationId: Type.Union([Type.String(), Type.Null()], { description: 'The generation that made it; null for uploads.' }),
    createdAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);
export type AssetOut = Static<typeof AssetOut>;

export function toAssetOut(asset: Asset): AssetOut {
  return {
    id: asset.id,
    workspaceId: asset.workspaceId,
    mediaType: asset.mediaType,
    contentType: asset.contentType,
    bytes: Number(asset.bytes),
    width: asset.width,
    height: asset.height,
    durationSeconds: asset.durationSeconds,
    favorite: asset.favorite,
    name: asset.name,
    sourceGenerationId: asset.sourceGenerationId,
    createdAt: asset.createdAt.toISOString(),
  };
}

export const AssetPatch = Type.Object(
  {
    workspaceId: Type.Optional(WorkspaceIdField),
    favorite: Type.Optional(Type.Boolean()),
    name: Type.Optional(Type.Union([AssetName, Type.Null()], { description: 'null clears the name.' })),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const DownloadOut = Type.Object(
  {
    url: Type.String({ description: 'GET this URL for the bytes; it needs no credentials.' }),
    expiresAt: Type.String({ format: 'date-time', description: 'The URL stops working then (5 minutes).' }),
  },
  { additionalProperties: false },
);

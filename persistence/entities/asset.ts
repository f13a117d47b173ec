import { BigIntType, EntitySchema } from '@mikro-orm/core';

export const MEDIA_TYPES = ['image', 'video', 'audio'] as const;
export type MediaType = (typeof MEDIA_TYPES)[number];

/** A file of a workspace: an upload made an asset by upload-complete, or an output of a generation. */
export interface Asset {
  id: string;
  workspaceId: string;
  mediaType: MediaType;
  contentType: string;
  bytes: number;
  width: number | null;
  height: number | null;
  durationSeconds: number | null;
  favorite: boolean;
  /** The uploaded file's name, or one set with PATCH; never a storage path. */
  name: string | null;
  sourceGenerationId: string | null;
  /** Where the bytes are in the blob store; never shown to clients. */
  storageKey: string;
  createdAt: Date;
  updatedAt: Date;
}

export const AssetEntity = new EntitySchema<Asset>({
  name: 'Asset',
  tableName: 'assets',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string', fieldName: 'workspace_id' },
    mediaType: { type: 'string', fieldName: 'media_type' },
    contentType: { type: 'string', fieldName: 'content_type' },
    bytes: { type: new BigIntType('number') },
    width: { type: 'integer', nullable: true },
    height: { type: 'integer', nullable: true },
    durationSeconds: { type: 'double', fieldName: 'duration_seconds', nullable: true },
    favorite: { type: 'boolean', default: false },
    name: { type: 'string', nullable: true },
    sourceGenerationId: { type: 'string', fieldName: 'source_generation_id', nullable: true },
    storageKey: { type: 'string', fieldName: 'storage_key' },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
  },
});

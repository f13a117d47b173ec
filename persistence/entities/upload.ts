import { BigIntType, EntitySchema } from '@mikro-orm/core';
import type { MediaType } from './asset.ts';

/** An upload intent: POST /v1/files/upload-url made it, upload-complete turns its object into an asset. */
export interface Upload {
  id: string;
  workspaceId: string;
  storageKey: string;
  mediaType: MediaType;
  /** Declared by the client, bound into the signed URL and checked again at completion. */
  contentType: string;
  bytes: number;
  filename: string;
  /** The user or API key that asked for it. */
  createdBy: string | null;
  createdAt: Date;
  /** When the signed upload URL stops working. */
  expiresAt: Date;
  completedAt: Date | null;
  assetId: string | null;
}

export const UploadEntity = new EntitySchema<Upload>({
  name: 'Upload',
  tableName: 'uploads',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string', fieldName: 'workspace_id' },
    storageKey: { type: 'string', fieldName: 'storage_key' },
    mediaType: { type: 'string', fieldName: 'media_type' },
    contentType: { type: 'string', fieldName: 'content_type' },
    bytes: { type: new BigIntType('number') },
    filename: { type: 'string' },
    createdBy: { type: 'string', fieldName: 'created_by', nullable: true },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    expiresAt: { type: 'Date', fieldName: 'expires_at' },
    completedAt: { type: 'Date', fieldName: 'completed_at', nullable: true },
    assetId: { type: 'string', fieldName: 'asset_id', nullable: true },
  },
});

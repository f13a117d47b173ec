import type { RouteDef } from '../../route.ts';
import { createUploadUrl } from './upload-url.ts';
import { completeUpload } from './upload-complete.ts';
import { listAssets } from '../assets/list.ts';
import { getAsset } from '../assets/get.ts';
import { getAssetDownload } from '../assets/download.ts';
import { updateAsset } from '../assets/update.ts';
import { deleteAssetRoute } from '../assets/delete.ts';
import { getWorkspaceStorage } from '../storage/get.ts';
import { putSignedUpload } from '../blobs/upload.ts';
import { getSignedDownload } from '../blobs/download.ts';

/** Files and assets (docs/assets.md), and the local blob store's signed upload and download URLs. */
export const fileRoutes: RouteDef[] = [
  createUploadUrl,
  completeUpload,
  listAssets,
  getAsset,
  getAssetDownload,
  updateAsset,
  deleteAssetRoute,
  getWorkspaceStorage,
  putSignedUpload,
  getSignedDownload,
];

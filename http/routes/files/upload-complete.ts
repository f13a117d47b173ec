import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { canonicalContentType, imageSize, SNIFF_BYTES, sniffContentType } from '../../../persistence/assets/media.ts';
import { StorageLimitError, createAsset } from '../../../persistence/assets/store.ts';
import { claimUpload } from '../../../persistence/assets/uploads.ts';
import { findUpload } from '../../../persistence/stores/files.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { openFilesWorkspace } from '../assets/access.ts';
import { AssetOut, toAssetOut } from '../assets/shapes.ts';
import { UPLOAD_COMPLETE_GRACE_MS, UploadCompleteIn } from './shapes.ts';

class AlreadyCompleted extends Error {}

export const completeUpload = defineRoute({
  method: 'POST',
  path: '/v1/files/upload-complete',
  operationId: 'completeUpload',
  summary: 'Step 3 of an upload: checks the uploaded object (size, type, and its first bytes) and makes it an asset',
  description:
    'Step 3 of an upload, after the PUT: checks the stored object (size, type and first bytes) and makes it an asset of the workspace. An object that does not match what was declared is 400; an upload already completed or expired, or with nothing uploaded yet, is 409.',
  tags: ['files'],
  access: { scopes: ['files.write'] },
  errors: ['not_found', 'conflict', 'plan_limit_reached'],
  body: UploadCompleteIn,
  responses: { 201: AssetOut },
  handler: async ({ auth, body, services }) => {
    const unit = openUnit(services.db);
    const { workspace } = await openFilesWorkspace(unit, auth, body.workspaceId);
    // Another workspace's upload answers exactly as a missing one.
    const upload = await findUpload(unit, body.workspaceId, body.uploadId);
    if (!upload) throw new ApiError('not_found', `No upload ${body.uploadId}.`);
    if (upload.completedAt) throw new ApiError('conflict', `Upload ${upload.id} was already completed as asset ${upload.assetId}.`);
    const now = services.clock.now();
    if (now > upload.expiresAt.getTime() + UPLOAD_COMPLETE_GRACE_MS) {
      throw new ApiError('conflict', `Upload ${upload.id} expired; ask for a new upload URL.`);
    }

    const blobs = services.blobs;
    const key = upload.storageKey;
    const info = await blobs.stat(key);
    if (!info) throw new ApiError('conflict', 'Nothing was uploaded yet: PUT the file to the upload URL first.');
    // A wrong object is removed, so the same URL (while valid) can take the right one.
    const refuse = async (message: string): Promise<never> => {
      await blobs.delete(key);
      throw new ApiError('validation_error', message);
    };
    if (info.bytes !== Number(upload.bytes)) await refuse(`The uploaded file has ${info.bytes} bytes, not the declared ${upload.bytes}.`);
    if (info.contentType !== undefined && canonicalContentType(info.contentType) !== upload.contentType) {
      await refuse(`The file was uploaded as ${info.contentType}, not the declared ${upload.contentType}.`);
    }
    const head = (await blobs.readStart(key, SNIFF_BYTES)) ?? Buffer.alloc(0);
    const sniffed = sniffContentType(head);
    if (sniffed !== upload.contentType) {
      await refuse(`The file's content is not ${upload.contentType}${sniffed ? ` (it looks like ${sniffed})` : ' (it is not a supported media file)'}.`);
    }
    const size = upload.mediaType === 'image' ? imageSize(head, upload.contentType) : undefined;

    const assetId = newId('ast', now);
    let asset;
    try {
      asset = await inTransaction(unit, async (tx) => {
        if (!(await claimUpload(tx, upload.id, assetId, new Date(now)))) throw new AlreadyCompleted();
        return createAsset(tx, {
          id: assetId,
          workspaceId: upload.workspaceId,
          mediaType: upload.mediaType,
          contentType: upload.contentType,
          bytes: Number(upload.bytes),
          width: size?.width ?? null,
          height: size?.height ?? null,
          name: upload.filename,
          storageKey: key,
          createdAt: new Date(now),
          limitBytes: services.catalog.plan(workspace.plan).storageBytes,
        });
      });
    } catch (error) {
      if (error instanceof AlreadyCompleted) throw new ApiError('conflict', `Upload ${upload.id} was already completed.`);
      if (error instanceof StorageLimitError) {
        await blobs.delete(key);
        const { usedBytes, limitBytes, requestedBytes } = error.refusal;
        throw new ApiError(
          'plan_limit_reached',
          `Storage limit reached: ${usedBytes} of ${limitBytes} bytes used, ${requestedBytes} more asked for. The upload was discarded.`,
        );
      }
      throw error;
    }
    return { status: 201, body: toAssetOut(asset) };
  },
});

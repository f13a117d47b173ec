import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { canonicalContentType, contentTypeOfFilename, mediaTypeOf } from '../../../persistence/assets/media.ts';
import { storageUsage } from '../../../persistence/assets/store.ts';
import { sweepAbandonedUploads } from '../../../persistence/assets/uploads.ts';
import { uploadStorageKey } from '../../../persistence/blob-store/types.ts';
import { insertUpload } from '../../../persistence/stores/files.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openFilesWorkspace } from '../assets/access.ts';
import { checkFilename, UPLOAD_COMPLETE_GRACE_MS, UPLOAD_URL_TTL_SECONDS, UploadUrlIn, UploadUrlOut } from './shapes.ts';

export const createUploadUrl = defineRoute({
  method: 'POST',
  path: '/v1/files/upload-url',
  operationId: 'createUploadUrl',
  summary: 'Step 1 of an upload: a signed URL to PUT one file of the declared type and exact size to, valid 15 minutes',
  description:
    'Step 1 of an upload: declares one file (type, exact size, name) and answers a signed URL to PUT its bytes to, valid for 15 minutes. A type the plan does not allow, a file larger than the plan allows, or one past the storage limit is 422 plan_limit_reached.',
  tags: ['files'],
  access: { scopes: ['files.write'] },
  errors: ['not_found', 'plan_limit_reached'],
  body: UploadUrlIn,
  responses: { 201: UploadUrlOut },
  handler: async ({ auth, body, services }) => {
    const filename = checkFilename(body.filename);
    const contentType = canonicalContentType(body.contentType);
    if (!contentType) throw new ApiError('validation_error', `body.contentType: ${JSON.stringify(body.contentType)} is not a supported file type`);
    const mediaType = mediaTypeOf(contentType)!;
    if (body.mediaType !== undefined && body.mediaType !== mediaType) {
      throw new ApiError('validation_error', `body.mediaType: ${contentType} is ${mediaType}, not ${body.mediaType}`);
    }
    const named = contentTypeOfFilename(filename);
    if (named !== undefined && mediaTypeOf(named) !== undefined && named !== contentType) {
      throw new ApiError('validation_error', `body.filename: the extension says ${named}, but contentType is ${contentType}`);
    }

    const unit = openUnit(services.db);
    const { workspace } = await openFilesWorkspace(unit, auth, body.workspaceId);
    const plan = services.catalog.plan(workspace.plan);
    const allowed = plan.uploadMediaTypes;
    if (!allowed.includes(mediaType)) {
      throw new ApiError('plan_limit_reached', `The ${plan.name} plan does not allow ${mediaType} uploads (it allows ${allowed.join(', ')}).`);
    }
    if (body.bytes > plan.maxFileBytes) {
      throw new ApiError('plan_limit_reached', `The ${plan.name} plan allows files of at most ${plan.maxFileBytes} bytes; this one has ${body.bytes}.`);
    }
    // An early answer for a file that cannot fit; upload-complete checks again, atomically.
    const usage = await storageUsage(unit, workspace.id);
    if (usage.usedBytes + body.bytes > plan.storageBytes) {
      throw new ApiError('plan_limit_reached', `Storage limit reached: ${usage.usedBytes} of ${plan.storageBytes} bytes used, ${body.bytes} more asked for.`);
    }

    const now = services.clock.now();
    await sweepAbandonedUploads(unit, services.blobs, workspace.id, new Date(now - UPLOAD_COMPLETE_GRACE_MS));
    const id = newId('upl', now);
    const storageKey = uploadStorageKey(workspace.id, id);
    const presigned = await services.blobs.presignUpload(storageKey, { contentType, bytes: body.bytes, expiresInSeconds: UPLOAD_URL_TTL_SECONDS });
    await insertUpload(unit, {
      id,
      workspaceId: workspace.id,
      storageKey,
      mediaType,
      contentType,
      bytes: body.bytes,
      filename,
      createdBy: auth?.kind === 'key' ? auth.keyId : (auth?.userId ?? null),
      createdAt: new Date(now),
      expiresAt: presigned.expiresAt,
    });
    return {
      status: 201,
      headers: { 'Cache-Control': 'no-store' },
      body: { uploadId: id, url: presigned.url, method: 'PUT', headers: presigned.headers, expiresAt: presigned.expiresAt.toISOString() },
    };
  },
});

import { ApiError, ParamError } from '../../errors.ts';
import type { RequestContext } from '../../route.ts';
import type { Services } from '../../services.ts';
import type { PlanEntitlements } from '../../../domain/plans.ts';
import { imageSize, mediaTypeOf, sniffContentType } from '../../../persistence/assets/media.ts';
import { createAsset, deleteAsset, StorageLimitError } from '../../../persistence/assets/store.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { assetStorageKey } from '../../../persistence/blob-store/types.ts';
import { newId } from '../../../persistence/ids.ts';
import { readLimited } from '../../../runtime/read-limited.ts';
import { invalid } from './chat-request.ts';

/**
 * The multipart/form-data bodies of the OpenAI-compatible door (POST /openai/v1/images/edits), as the official
 * clients send them: read whole within a bound, then parsed by the web platform's own parser (undici's
 * `Response.formData()`); and the uploaded images stored as assets of the workspace, so that a job takes them
 * as any other generation takes its inputs (`inputs.imageAssetIds`).
 */

/** A multipart request of the door at most: several images and a few text fields. */
export const MAX_FORM_BYTES = 64 * 1024 * 1024;

/** A form read: its exact bytes (a cluster forward signs and sends these) and its entries. */
export interface ReadForm {
  raw: Buffer;
  form: FormData;
}

const tooLarge = (maxBytes: number) => new ApiError('payload_too_large', `A multipart request of this API is at most ${maxBytes} bytes in all.`);

/** Reads the body of a `rawBody: 'stream'` route as multipart/form-data, refusing more than `maxBytes` before holding them. */
export async function readForm(ctx: RequestContext, maxBytes = MAX_FORM_BYTES): Promise<ReadForm> {
  const contentType = ctx.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(contentType) || !/boundary=/i.test(contentType)) {
    throw invalid(null, 'This endpoint takes a multipart/form-data body (with its boundary), as the official clients send it.', 'invalid_content_type');
  }
  const declared = ctx.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  if (!ctx.bodyStream) throw invalid(null, 'The request has no body.', null);
  const raw = await readLimited(ctx.bodyStream, maxBytes, () => tooLarge(maxBytes));
  let form: FormData;
  try {
    form = await new Response(raw, { headers: { 'content-type': contentType } }).formData();
  } catch {
    throw invalid(null, 'The multipart/form-data body could not be read.', 'invalid_multipart');
  }
  return { raw, form };
}

/** An uploaded image, checked: its bytes, its type as its first bytes show it, and the name it was sent with. */
export interface UploadedImage {
  bytes: Buffer;
  contentType: string;
  name: string | null;
}

/** A file name as an asset keeps it: no directories, no control characters, at most 255 characters; null when nothing is left. */
function nameOf(file: File): string | null {
  const base = (file.name ?? '')
    .split(/[/\\]/)
    .pop()!
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .trim();
  return base === '' || base === '.' || base === '..' ? null : base.slice(0, 255);
}

/**
 * The uploaded files of `param` as images the workspace's plan takes: each at most the plan's largest file,
 * and by its first bytes a PNG, JPEG, GIF or WEBP (what an upload of the files API takes), whatever it was
 * declared as. Refused naming `param` (`image`, or `image[i]` of several).
 */
export async function checkImages(files: File[], param: string, plan: PlanEntitlements): Promise<UploadedImage[]> {
  if (!plan.uploadMediaTypes.includes('image')) {
    throw new ParamError('plan_limit_reached', `The ${plan.name} plan does not allow image uploads.`, param, 'plan_limit_reached');
  }
  const images: UploadedImage[] = [];
  for (const [i, file] of files.entries()) {
    const at = files.length > 1 ? `${param}[${i}]` : param;
    if (file.size > plan.maxFileBytes) {
      throw new ParamError(
        'plan_limit_reached',
        `The ${plan.name} plan takes files of at most ${plan.maxFileBytes} bytes; '${at}' has ${file.size}.`,
        at,
        'plan_limit_reached',
      );
    }
    if (file.size === 0) throw invalid(at, `Invalid '${at}': the file is empty.`, 'invalid_image');
    const bytes = Buffer.from(await file.arrayBuffer());
    const contentType = sniffContentType(bytes);
    if (!contentType || mediaTypeOf(contentType) !== 'image') {
      throw invalid(
        at,
        `Invalid '${at}': the file is not a PNG, JPEG, GIF or WEBP image${contentType ? ` (it looks like ${contentType})` : ''}.`,
        'invalid_image_format',
      );
    }
    images.push({ bytes, contentType, name: nameOf(file) });
  }
  return images;
}

/**
 * Stores checked images as assets of the workspace (they count in its storage, as an upload does) and answers
 * their ids, in order. Past the plan's storage limit nothing is left stored and the answer is 422 plan_limit_reached.
 */
export async function storeImages(services: Services, workspaceId: string, plan: PlanEntitlements, images: UploadedImage[], param: string): Promise<string[]> {
  const stored: string[] = [];
  try {
    for (const image of images) {
      const now = services.clock.now();
      const id = newId('ast', now);
      const storageKey = assetStorageKey(workspaceId, id);
      await services.blobs.put(storageKey, image.bytes, image.contentType);
      const size = imageSize(image.bytes, image.contentType);
      try {
        await inTransaction(openUnit(services.db), (tx) =>
          createAsset(tx, {
            id,
            workspaceId,
            mediaType: 'image',
            contentType: image.contentType,
            bytes: image.bytes.length,
            width: size?.width ?? null,
            height: size?.height ?? null,
            name: image.name,
            storageKey,
            createdAt: new Date(now),
            limitBytes: plan.storageBytes,
          }),
        );
      } catch (error) {
        await services.blobs.delete(storageKey);
        if (error instanceof StorageLimitError) {
          const { usedBytes, limitBytes, requestedBytes } = error.refusal;
          throw new ParamError(
            'plan_limit_reached',
            `Storage limit reached: ${usedBytes} of ${limitBytes} bytes used, ${requestedBytes} more asked for. The images were discarded.`,
            param,
            'plan_limit_reached',
          );
        }
        throw error;
      }
      stored.push(id);
    }
  } catch (error) {
    await removeImages(services, workspaceId, stored);
    throw error;
  }
  return stored;
}

/** Removes images stored for a request that made no job of them (refused, or an Idempotency-Key's replay). */
export async function removeImages(services: Services, workspaceId: string, assetIds: readonly string[]): Promise<void> {
  for (const id of assetIds) {
    try {
      const removed = await inTransaction(openUnit(services.db), (tx) => deleteAsset(tx, workspaceId, id));
      if (removed) await services.blobs.delete(removed.storageKey);
    } catch (error) {
      services.logger.warn({ err: error, workspaceId, assetId: id }, 'removing an image uploaded for a refused edit failed');
    }
  }
}

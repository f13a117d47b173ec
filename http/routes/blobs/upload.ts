import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { BlobExistsError, BlobTooLargeError, BlobTooShortError, LOCAL_UPLOAD_PATH, LocalBlobStore } from '../../../persistence/blob-store/local.ts';
import { canonicalContentType } from '../../../persistence/assets/media.ts';
import { uploadOfKey } from '../../../persistence/stores/files.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const SignedUploadQuery = Type.Object(
  {
    key: Type.String({ minLength: 1, maxLength: 300 }),
    exp: Type.Integer({ minimum: 0 }),
    ct: Type.String({ minLength: 1, maxLength: 100 }),
    len: Type.Integer({ minimum: 1 }),
    sig: Type.String({ minLength: 1, maxLength: 128 }),
  },
  { additionalProperties: false },
);

/**
 * Step 2 of an upload on the local blob store: the body is streamed to disk, never held whole, and must be
 * exactly the signed length. The HMAC signature of the URL is the credential: a URL that was changed, has
 * expired, or is used with another Content-Type is refused (403). An object is stored once: a URL whose
 * upload was already sent (409) or completed (409) takes no other.
 */
export const putSignedUpload = defineRoute({
  method: 'PUT',
  path: LOCAL_UPLOAD_PATH,
  operationId: 'putSignedUpload',
  summary: 'Receive the bytes of an upload at the signed URL of POST /v1/files/upload-url (local blob store)',
  description:
    'Receives the bytes of an upload at the signed URL that POST /v1/files/upload-url gave, when the service stores files itself (local blob store). The URL is the credential: one that is not valid, has expired or is used with another Content-Type is 403, and the body must have exactly the declared size.',
  tags: ['files'],
  access: 'public',
  errors: ['forbidden', 'not_found', 'conflict', 'payload_too_large', 'validation_error'],
  rawBody: 'stream',
  query: SignedUploadQuery,
  responses: { 200: null },
  handler: async ({ query, headers, bodyStream, services }) => {
    const blobs = services.blobs;
    if (!(blobs instanceof LocalBlobStore)) throw new ApiError('not_found', 'This service stores files in S3-compatible storage; use the URL it gave you.');
    if (!blobs.verifyUpload(query)) throw new ApiError('forbidden', 'The upload URL is not valid or has expired.');
    const sent = headers['content-type'];
    if (sent === undefined || canonicalContentType(sent) !== query.ct) {
      throw new ApiError('forbidden', `This URL is signed for Content-Type: ${query.ct}; the request sent ${sent === undefined ? 'none' : sent}.`);
    }
    const declared = headers['content-length'];
    if (declared !== undefined && Number(declared) > query.len) throw new ApiError('payload_too_large', `This URL takes exactly ${query.len} bytes.`);
    if (declared !== undefined && Number(declared) < query.len)
      throw new ApiError('validation_error', `This URL takes exactly ${query.len} bytes; the request has ${declared}.`);

    const upload = await uploadOfKey(openUnit(services.db), query.key);
    if (!upload) throw new ApiError('forbidden', 'The upload URL is not valid or has expired.');
    if (upload.completed_at !== null) throw new ApiError('conflict', 'This upload was already completed; ask for a new upload URL.');
    try {
      await blobs.receive(query.key, bodyStream!, query.len);
    } catch (error) {
      if (error instanceof BlobTooLargeError) throw new ApiError('payload_too_large', `This URL takes exactly ${query.len} bytes.`);
      if (error instanceof BlobTooShortError) throw new ApiError('validation_error', error.message);
      if (error instanceof BlobExistsError) throw new ApiError('conflict', 'A file was already uploaded to this URL.');
      throw error;
    }
    return { status: 200 };
  },
});

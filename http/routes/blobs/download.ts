import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { LOCAL_DOWNLOAD_PATH, LocalBlobStore } from '../../../persistence/blob-store/local.ts';
import { contentDisposition } from '../../../persistence/blob-store/content-disposition.ts';

export const SignedDownloadQuery = Type.Object(
  {
    key: Type.String({ minLength: 1, maxLength: 300 }),
    exp: Type.Integer({ minimum: 0 }),
    ct: Type.String({ minLength: 1, maxLength: 100 }),
    fn: Type.String({ maxLength: 300 }),
    sig: Type.String({ minLength: 1, maxLength: 128 }),
  },
  { additionalProperties: false },
);

/**
 * The bytes of an asset at a signed URL of GET /v1/assets/:id/download (local blob store), streamed with
 * backpressure. Served as an attachment with nosniff and a sandbox policy, so an uploaded file is never
 * run as a page of the service's origin.
 */
export const getSignedDownload = defineRoute({
  method: 'GET',
  path: LOCAL_DOWNLOAD_PATH,
  operationId: 'getSignedDownload',
  summary: "Download an asset's bytes from a signed URL (local blob store)",
  description:
    'Sends the bytes of an asset from a signed download URL, when the service stores files itself (local blob store). The URL is the credential: one that is not valid or has expired is 403.',
  tags: ['assets'],
  access: 'public',
  errors: ['forbidden', 'not_found'],
  query: SignedDownloadQuery,
  responses: { 200: null },
  handler: async ({ query, services }) => {
    const blobs = services.blobs;
    if (!(blobs instanceof LocalBlobStore)) throw new ApiError('not_found', 'This service stores files in S3-compatible storage; use the URL it gave you.');
    if (!blobs.verifyDownload(query)) throw new ApiError('forbidden', 'The download URL is not valid or has expired.');
    const info = await blobs.stat(query.key);
    const body = info && (await blobs.get(query.key));
    if (!info || !body) throw new ApiError('not_found', 'The file no longer exists.');
    return {
      status: 200,
      stream: { body, length: info.bytes },
      headers: {
        'Content-Type': query.ct,
        'Content-Disposition': contentDisposition(query.fn || undefined),
        'X-Content-Type-Options': 'nosniff',
        'Content-Security-Policy': "default-src 'none'; sandbox",
        'Cache-Control': 'private, max-age=300',
      },
    };
  },
});

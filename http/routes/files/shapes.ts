import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { MediaTypeName, WorkspaceIdField } from '../assets/shapes.ts';

/** Request and response shapes of the upload flow. */

/** Upload URLs work for 15 minutes (docs/assets.md, The upload flow). */
export const UPLOAD_URL_TTL_SECONDS = 15 * 60;
/** An upload may still be completed this long after its URL expired; after that it is swept away. */
export const UPLOAD_COMPLETE_GRACE_MS = 60 * 60 * 1000;

export const UploadUrlIn = Type.Object(
  {
    workspaceId: WorkspaceIdField,
    filename: Type.String({ minLength: 1, maxLength: 255, description: "The file's name, without any directory; kept as the asset's name." }),
    contentType: Type.String({ minLength: 1, maxLength: 100, description: 'One of the supported types, e.g. image/png (see the docs).' }),
    bytes: Type.Integer({
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'The exact size of the file; the PUT must send exactly this many bytes.',
    }),
    mediaType: Type.Optional(MediaTypeName),
  },
  { additionalProperties: false },
);

export const UploadUrlOut = Type.Object(
  {
    uploadId: Type.String({ description: 'upl_…; pass it to POST /v1/files/upload-complete.' }),
    url: Type.String({ description: "PUT the file's bytes here, with the headers below; no other credentials." }),
    method: Type.Literal('PUT'),
    headers: Type.Record(Type.String(), Type.String(), { description: 'Headers the PUT must carry, exactly.' }),
    expiresAt: Type.String({ format: 'date-time', description: 'The URL stops working then (15 minutes).' }),
  },
  { additionalProperties: false },
);

export const UploadCompleteIn = Type.Object(
  {
    workspaceId: WorkspaceIdField,
    uploadId: Type.String({ minLength: 1, maxLength: 64 }),
  },
  { additionalProperties: false },
);

/** A file name, not a path: no directories, no `.`/`..`, no control characters. */
export function checkFilename(filename: string): string {
  if (/[/\\]/.test(filename)) throw new ApiError('validation_error', 'body.filename: must be a file name without directories (no / or \\)');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(filename)) throw new ApiError('validation_error', 'body.filename: must not contain control characters');
  const trimmed = filename.trim();
  if (trimmed === '' || trimmed === '.' || trimmed === '..') throw new ApiError('validation_error', 'body.filename: must be a file name');
  return trimmed;
}

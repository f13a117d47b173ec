/**
 * The blob store: where the bytes of assets live. Two back ends behind this one interface, chosen once at
 * start-up (app/service.ts, from config) and handed on as `services.blobs`:
 *
 * - `local` (default): files under `${DATA_DIR}/blobs`; its signed upload and download URLs point at the
 *   service itself (`PUT /v1/blobs/upload`, `GET /v1/blobs/download`), signed with HMAC-SHA256.
 * - `s3`: an S3-compatible bucket (S3_BUCKET, S3_ENDPOINT, ...); URLs are presigned with the AWS SDK.
 *
 * Keys are chosen by the service, never by clients: `assets/<workspaceId>/<assetId>` for generation
 * outputs (see `assetStorageKey`) and `uploads/<workspaceId>/<uploadId>` for uploads.
 *
 * How a generation stores an output (inside its own transaction for the row; see persistence/assets):
 *
 *     const id = newId('ast');
 *     const storageKey = assetStorageKey(workspaceId, id);
 *     await services.blobs.put(storageKey, pngBytes, 'image/png');
 *     const result = await tryCreateAsset(em, { id, workspaceId, mediaType: 'image', contentType: 'image/png',
 *       bytes: pngBytes.length, width, height, sourceGenerationId, storageKey });
 *     if (!result.ok) await services.blobs.delete(storageKey); // plan storage limit reached: nothing was made
 */
import type { Readable } from 'node:stream';

export type BlobStoreKind = 'local' | 's3';

export interface BlobInfo {
  bytes: number;
  /** As recorded by the back end; the local one records none (its upload route enforces the signed type). */
  contentType: string | undefined;
}

export interface PresignedUpload {
  url: string;
  method: 'PUT';
  /** Headers the client must send with the PUT, exactly (they are part of the signature). */
  headers: Record<string, string>;
  expiresAt: Date;
}

export interface PresignedDownload {
  url: string;
  expiresAt: Date;
}

export interface UploadGrant {
  contentType: string;
  /** The exact size of the object; a PUT of any other size is refused. */
  bytes: number;
  expiresInSeconds: number;
}

export interface DownloadGrant {
  /** The Content-Type the download is served with. */
  contentType: string;
  /** Offered to the browser as the attachment's file name. */
  filename?: string;
  expiresInSeconds: number;
}

export interface BlobStore {
  readonly kind: BlobStoreKind;
  /** A URL the client PUTs one object of this type and size to, until it expires. */
  presignUpload(key: string, grant: UploadGrant): Promise<PresignedUpload>;
  /** A short-lived URL the client GETs the object from. */
  presignDownload(key: string, grant: DownloadGrant): Promise<PresignedDownload>;
  /** Stores an object whole, streamed from `body`; replaces any object under the key. */
  put(key: string, body: Uint8Array | Readable, contentType: string): Promise<BlobInfo>;
  /** The object as a stream, or undefined when there is none. */
  get(key: string): Promise<Readable | undefined>;
  /** Up to the first `length` bytes (for sniffing the real type), or undefined when there is no object. */
  readStart(key: string, length: number): Promise<Buffer | undefined>;
  stat(key: string): Promise<BlobInfo | undefined>;
  /** Removes the object; no error when it is already gone. */
  delete(key: string): Promise<void>;
  close(): Promise<void>;
}

/** The key of a generation output or any asset made by the service itself. */
export function assetStorageKey(workspaceId: string, assetId: string): string {
  return `assets/${workspaceId}/${assetId}`;
}

/** The key an upload intent's object is PUT to; the asset made from it keeps this key. */
export function uploadStorageKey(workspaceId: string, uploadId: string): string {
  return `uploads/${workspaceId}/${uploadId}`;
}

/** Keys are made by the service from ids; anything else (`..`, absolute paths, odd characters) is refused. */
const KEY_PATTERN = /^[a-z]+(?:\/[A-Za-z0-9_-]{1,64}){1,4}$/;
export function isValidKey(key: string): boolean {
  return KEY_PATTERN.test(key);
}

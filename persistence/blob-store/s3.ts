import { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { BlobInfo, BlobStore, DownloadGrant, PresignedDownload, PresignedUpload, UploadGrant } from './types.ts';
import { isValidKey } from './types.ts';
import { contentDisposition } from './content-disposition.ts';

export interface S3Options {
  bucket: string;
  /** Unset: AWS itself. */
  endpoint: string | undefined;
  region: string;
  /** Unset: the SDK's default credential chain (environment, instance role, ...). */
  accessKeyId: string | undefined;
  secretAccessKey: string | undefined;
  forcePathStyle: boolean;
}

/**
 * Blobs in an S3-compatible bucket. Upload URLs sign Content-Type, Content-Length and `If-None-Match: *`,
 * so the storage refuses another type or size, and refuses a second PUT over an object already uploaded
 * (S3 conditional writes). upload-complete checks size and type again with HEAD and sniffs the bytes,
 * since not every S3-compatible server enforces all of that.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  private readonly client: S3Client;
  private readonly bucket: string;

  constructor(
    options: S3Options,
    private readonly now: () => number,
  ) {
    this.bucket = options.bucket;
    this.client = new S3Client({
      region: options.region,
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle,
      credentials: options.accessKeyId && options.secretAccessKey ? { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey } : undefined,
      // A presigned PUT must not carry a checksum of a body the SDK never saw.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async presignUpload(key: string, grant: UploadGrant): Promise<PresignedUpload> {
    checkKey(key);
    const signingDate = new Date(this.now());
    const command = new PutObjectCommand({ Bucket: this.bucket, Key: key, ContentType: grant.contentType, ContentLength: grant.bytes, IfNoneMatch: '*' });
    const url = await getSignedUrl(this.client, command, {
      expiresIn: grant.expiresInSeconds,
      signingDate,
      signableHeaders: new Set(['content-type', 'content-length', 'if-none-match']),
    });
    return {
      url,
      method: 'PUT',
      headers: { 'Content-Type': grant.contentType, 'If-None-Match': '*' },
      expiresAt: new Date(signingDate.getTime() + grant.expiresInSeconds * 1000),
    };
  }

  async presignDownload(key: string, grant: DownloadGrant): Promise<PresignedDownload> {
    checkKey(key);
    const signingDate = new Date(this.now());
    const command = new GetObjectCommand({
      Bucket: this.bucket,
      Key: key,
      ResponseContentType: grant.contentType,
      ResponseContentDisposition: contentDisposition(grant.filename),
    });
    const url = await getSignedUrl(this.client, command, { expiresIn: grant.expiresInSeconds, signingDate });
    return { url, expiresAt: new Date(signingDate.getTime() + grant.expiresInSeconds * 1000) };
  }

  async put(key: string, body: Uint8Array | Readable, contentType: string): Promise<BlobInfo> {
    checkKey(key);
    if (body instanceof Readable) {
      // Multipart for streams of unknown length: parts are buffered one at a time, never the whole object.
      await new Upload({ client: this.client, params: { Bucket: this.bucket, Key: key, Body: body, ContentType: contentType } }).done();
    } else {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType, ContentLength: body.byteLength }));
    }
    const info = await this.stat(key);
    if (!info) throw new Error(`S3 object ${key} is missing right after it was written`);
    return info;
  }

  async get(key: string): Promise<Readable | undefined> {
    checkKey(key);
    try {
      const result = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return result.Body as Readable;
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  async readStart(key: string, length: number): Promise<Buffer | undefined> {
    checkKey(key);
    try {
      const result = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: `bytes=0-${length - 1}` }));
      const bytes = await result.Body!.transformToByteArray();
      return Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, length));
    } catch (error) {
      if (isMissing(error)) return undefined;
      // An empty object has no byte 0 to start a range at.
      if (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 416) return Buffer.alloc(0);
      throw error;
    }
  }

  async stat(key: string): Promise<BlobInfo | undefined> {
    checkKey(key);
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { bytes: Number(head.ContentLength ?? 0), contentType: head.ContentType };
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}

function checkKey(key: string): void {
  if (!isValidKey(key)) throw new Error(`not a blob key: ${JSON.stringify(key)}`);
}

function isMissing(error: unknown): boolean {
  if (!(error instanceof S3ServiceException)) return false;
  return error.name === 'NoSuchKey' || error.name === 'NotFound' || error.$metadata.httpStatusCode === 404;
}

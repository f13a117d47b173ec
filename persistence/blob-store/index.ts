import path from 'node:path';
import { LocalBlobStore } from './local.ts';
import type { S3Options } from './s3.ts';
import { loadSigningSecret, UrlSigner } from './signing.ts';
import type { BlobStore } from './types.ts';

export type { BlobStore, BlobInfo, PresignedUpload, PresignedDownload, UploadGrant, DownloadGrant } from './types.ts';
export { assetStorageKey, uploadStorageKey } from './types.ts';

export type BlobStoreOptions = { kind: 'local'; dataDir: string; baseUrl: () => string; signingSecret: string | undefined } | ({ kind: 's3' } & S3Options);

/** Builds the blob store configuration chose; `now` is the service clock, which URLs expire by. */
export async function createBlobStore(options: BlobStoreOptions, now: () => number): Promise<BlobStore> {
  if (options.kind === 's3') {
    // The AWS SDK (about 200 ms of CPU to load) only when S3 is configured, not on every start.
    const { S3BlobStore } = await import('./s3.ts');
    return new S3BlobStore(options, now);
  }
  const secret = await loadSigningSecret(options.signingSecret, options.dataDir);
  return new LocalBlobStore(path.join(options.dataDir, 'blobs'), new UrlSigner(secret), options.baseUrl, now);
}

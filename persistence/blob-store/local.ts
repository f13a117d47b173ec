import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BlobInfo, BlobStore, DownloadGrant, PresignedDownload, PresignedUpload, UploadGrant } from './types.ts';
import { isValidKey } from './types.ts';
import type { UrlSigner } from './signing.ts';

/** Paths of the service's own blob routes (http/routes/blobs). */
export const LOCAL_UPLOAD_PATH = '/v1/blobs/upload';
export const LOCAL_DOWNLOAD_PATH = '/v1/blobs/download';

/** The query of a signed upload URL: key, expiry (unix seconds), content type, exact length, signature. */
export interface UploadQuery {
  key: string;
  exp: number;
  ct: string;
  len: number;
  sig: string;
}
/** The query of a signed download URL: key, expiry, content type served, file name offered ('' for none). */
export interface DownloadQuery {
  key: string;
  exp: number;
  ct: string;
  fn: string;
  sig: string;
}

/** The streamed body was longer than the signed length: nothing was stored. */
export class BlobTooLargeError extends Error {}
/** The streamed body ended short of the signed length: nothing was stored. */
export class BlobTooShortError extends Error {}
/** An object already exists under the key (a signed upload URL stores one object, once). */
export class BlobExistsError extends Error {}

/**
 * Blobs as files under `root` (`${DATA_DIR}/blobs`). Objects are written to a temporary file and published
 * under their key only once complete and flushed, so a reader never sees half an object.
 */
export class LocalBlobStore implements BlobStore {
  readonly kind = 'local' as const;

  constructor(
    private readonly root: string,
    private readonly signer: UrlSigner,
    /** The service's public base URL (BASE_URL), which the signed URLs point at. */
    private readonly baseUrl: () => string,
    private readonly now: () => number,
  ) {}

  async presignUpload(key: string, grant: UploadGrant): Promise<PresignedUpload> {
    this.pathOf(key);
    const exp = Math.floor(this.now() / 1000) + grant.expiresInSeconds;
    const sig = this.signer.sign(uploadFields(key, exp, grant.contentType, grant.bytes));
    const query = new URLSearchParams({ key, exp: String(exp), ct: grant.contentType, len: String(grant.bytes), sig });
    return {
      url: `${this.baseUrl()}${LOCAL_UPLOAD_PATH}?${query}`,
      method: 'PUT',
      headers: { 'Content-Type': grant.contentType },
      expiresAt: new Date(exp * 1000),
    };
  }

  async presignDownload(key: string, grant: DownloadGrant): Promise<PresignedDownload> {
    this.pathOf(key);
    const exp = Math.floor(this.now() / 1000) + grant.expiresInSeconds;
    const fn = grant.filename ?? '';
    const sig = this.signer.sign(downloadFields(key, exp, grant.contentType, fn));
    const query = new URLSearchParams({ key, exp: String(exp), ct: grant.contentType, fn, sig });
    return { url: `${this.baseUrl()}${LOCAL_DOWNLOAD_PATH}?${query}`, expiresAt: new Date(exp * 1000) };
  }

  /** Whether an upload URL's query is signed by us and not expired (expiry at whole seconds, inclusive). */
  verifyUpload(query: UploadQuery): boolean {
    return this.signer.verify(uploadFields(query.key, query.exp, query.ct, query.len), query.sig) && this.now() < query.exp * 1000 && isValidKey(query.key);
  }

  verifyDownload(query: DownloadQuery): boolean {
    return this.signer.verify(downloadFields(query.key, query.exp, query.ct, query.fn), query.sig) && this.now() < query.exp * 1000 && isValidKey(query.key);
  }

  /**
   * Stores the body of a signed PUT: streamed to disk (backpressure flows to `source`), exactly `bytes`
   * long (BlobTooLargeError as soon as it passes, BlobTooShortError at its end), and never over an existing
   * object (BlobExistsError).
   */
  async receive(key: string, source: Readable, bytes: number): Promise<BlobInfo> {
    const file = this.pathOf(key);
    if (await exists(file)) throw new BlobExistsError(`an object already exists under ${key}`);
    const temp = await this.writeTemp(file, source, bytes);
    try {
      // link, unlike rename, refuses to replace: of two racing uploads to one key only one lands.
      await fs.link(temp, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new BlobExistsError(`an object already exists under ${key}`);
      throw error;
    } finally {
      await fs.rm(temp, { force: true });
    }
    return { bytes, contentType: undefined };
  }

  async put(key: string, body: Uint8Array | Readable, _contentType: string): Promise<BlobInfo> {
    const file = this.pathOf(key);
    const source = body instanceof Readable ? body : Readable.from([body]);
    const temp = await this.writeTemp(file, source, undefined);
    try {
      await fs.rename(temp, file);
    } catch (error) {
      await fs.rm(temp, { force: true });
      throw error;
    }
    const stat = await fs.stat(file);
    return { bytes: stat.size, contentType: undefined };
  }

  async get(key: string): Promise<Readable | undefined> {
    const file = this.pathOf(key);
    try {
      const handle = await fs.open(file, 'r');
      return handle.createReadStream({ autoClose: true, highWaterMark: 256 * 1024 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async readStart(key: string, length: number): Promise<Buffer | undefined> {
    let handle;
    try {
      handle = await fs.open(this.pathOf(key), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    try {
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buffer, 0, length, 0);
      return buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  }

  async stat(key: string): Promise<BlobInfo | undefined> {
    try {
      const stat = await fs.stat(this.pathOf(key));
      return { bytes: stat.size, contentType: undefined };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await fs.rm(this.pathOf(key), { force: true });
  }

  async close(): Promise<void> {}

  /** The file of a key; keys are made by the service, and anything that could leave `root` is refused. */
  private pathOf(key: string): string {
    if (!isValidKey(key)) throw new Error(`not a blob key: ${JSON.stringify(key)}`);
    return path.join(this.root, ...key.split('/'));
  }

  /** Streams `source` into a new temporary file beside `file`, flushed to disk; returns its path. */
  private async writeTemp(file: string, source: Readable, exactBytes: number | undefined): Promise<string> {
    await fs.mkdir(path.dirname(file), { recursive: true });
    const temp = `${file}.${randomBytes(6).toString('hex')}.part`;
    try {
      const sink = createWriteStream(temp, { flags: 'wx', flush: true, highWaterMark: 256 * 1024 });
      if (exactBytes === undefined) await pipeline(source, sink);
      else await pipeline(source, new LengthGuard(exactBytes), sink);
    } catch (error) {
      await fs.rm(temp, { force: true });
      throw error;
    }
    return temp;
  }
}

/** Passes bytes through while their count stays within `expected`, and checks it was reached at the end. */
class LengthGuard extends Transform {
  private seen = 0;
  constructor(private readonly expected: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.expected) return callback(new BlobTooLargeError(`the body is longer than the signed ${this.expected} bytes`));
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.seen < this.expected) return callback(new BlobTooShortError(`the body has ${this.seen} bytes, not the signed ${this.expected}`));
    callback();
  }
}

function uploadFields(key: string, exp: number, contentType: string, bytes: number): Array<string | number> {
  return ['upload', key, exp, contentType, bytes];
}

function downloadFields(key: string, exp: number, contentType: string, filename: string): Array<string | number> {
  return ['download', key, exp, contentType, filename];
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}

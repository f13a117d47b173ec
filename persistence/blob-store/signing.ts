import { createHmac, timingSafeEqual } from 'node:crypto';
import { loadOrCreateSecret } from '../secret-file.ts';

/**
 * HMAC-SHA256 over a list of fields (serialised as JSON, so no field can run into the next).
 * The local blob store signs its URLs with it: what is signed cannot be changed without the secret.
 */
export class UrlSigner {
  constructor(private readonly secret: Buffer) {}

  sign(fields: Array<string | number>): string {
    return createHmac('sha256', this.secret).update(JSON.stringify(fields)).digest('hex');
  }

  /** Constant-time comparison; a signature of the wrong shape is simply not valid. */
  verify(fields: Array<string | number>, signature: string): boolean {
    if (!/^[0-9a-f]{64}$/.test(signature)) return false;
    return timingSafeEqual(Buffer.from(this.sign(fields), 'hex'), Buffer.from(signature, 'hex'));
  }
}

/**
 * The configured secret (BLOB_SIGNING_SECRET), or one generated once and kept in DATA_DIR, so URLs handed
 * out stay valid across restarts.
 */
export function loadSigningSecret(configured: string | undefined, dataDir: string): Promise<Buffer> {
  return loadOrCreateSecret(configured, dataDir, { file: 'blob-signing-secret', envName: 'BLOB_SIGNING_SECRET' });
}

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

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

const SECRET_FILE = 'blob-signing-secret';

/**
 * The configured secret (BLOB_SIGNING_SECRET), or one generated once and kept in DATA_DIR, so URLs handed
 * out stay valid across restarts. Several processes starting together agree on the first one written.
 */
export async function loadSigningSecret(configured: string | undefined, dataDir: string, fileName: string = SECRET_FILE): Promise<Buffer> {
  if (configured !== undefined) return Buffer.from(configured, 'utf8');
  const file = path.join(dataDir, fileName);
  await fs.mkdir(dataDir, { recursive: true });
  try {
    const handle = await fs.open(file, 'wx', 0o600);
    try {
      await handle.writeFile(randomBytes(32).toString('hex'));
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  // A concurrent starter may have created the file and not yet written it: wait for the 64 hex digits.
  for (let attempt = 0; ; attempt++) {
    const text = (await fs.readFile(file, 'utf8')).trim();
    if (/^[0-9a-f]{64}$/.test(text)) return Buffer.from(text, 'hex');
    if (attempt >= 50) throw new Error(`${file} does not hold a signing secret (64 hex digits); delete it or set its secret in the environment`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Seals small secrets (webhook signing secrets) for storage: AES-256-GCM with a random 96-bit nonce, the
 * row's id as associated data (a sealed value copied to another row does not open), and a key derived with
 * HKDF-SHA256 from the configured key material. Format: `v1.<base64url nonce|tag|ciphertext>`.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(keyMaterial: Buffer, purpose: string) {
    this.key = Buffer.from(hkdfSync('sha256', keyMaterial, Buffer.alloc(0), purpose, 32));
  }

  seal(plaintext: string, boundTo: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(Buffer.from(boundTo, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `v1.${Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64url')}`;
  }

  /** The plaintext; throws if the value was altered, sealed for another row, or under another key. */
  open(sealed: string, boundTo: string): string {
    if (!sealed.startsWith('v1.')) throw new Error('not a sealed value');
    const raw = Buffer.from(sealed.slice(3), 'base64url');
    if (raw.length < 28) throw new Error('sealed value too short');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(boundTo, 'utf8'));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }
}

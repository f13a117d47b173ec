import { hash, randomBytes, randomInt } from 'node:crypto';

export const API_KEY_PREFIX = 'gs_live_';
/** `gs_live_` and 64 characters of [A-Za-z0-9]. */
export const API_KEY_PATTERN = /^gs_live_[A-Za-z0-9]{64}$/;
/** How much of the plaintext a key list shows: `gs_live_` and four more characters. */
export const API_KEY_SHOWN_PREFIX_LENGTH = API_KEY_PREFIX.length + 4;
/** 32 random bytes in base64url. */
export const SESSION_TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** One-shot crypto.hash: no Hash object per call (this runs on every keyed request). */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}

/** A new plaintext API key: 64 characters drawn uniformly (no modulo bias) from crypto randomness. */
export function newApiKey(): string {
  let key = API_KEY_PREFIX;
  for (let i = 0; i < 64; i++) key += KEY_ALPHABET[randomInt(KEY_ALPHABET.length)];
  return key;
}

/** A new session token: 32 random bytes, base64url. */
export function newSessionToken(): string {
  return randomBytes(32).toString('base64url');
}

import { randomBytes } from 'node:crypto';

/** The id prefixes of DECISIONS.md ("Ids, times, money"), plus `evt` for webhook events, `ses` for sessions, `exp` for data exports and `upl` for upload intents. */
export type IdPrefix = 'evt' | 'gen' | 'ast' | 'key' | 'whk' | 'dlv' | 'ws' | 'usr' | 'inv' | 'txn' | 'dep' | 'top' | 'pay' | 'sub' | 'ses' | 'exp' | 'upl';

// Crockford base32 in lower case: its characters are in ASCII order, so ids sort as text in time order.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const RANDOM_MASK = (1n << 80n) - 1n;

let lastTime = -1;
let lastRandom = 0n;

/**
 * `usr_01jh…`: a ULID-like id (48-bit millisecond time, 80 random bits, 26 characters) behind the prefix.
 * Ids made later sort after earlier ones; within one millisecond (or if the clock steps back) the random
 * part counts up, so ids made in one process are strictly increasing.
 */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  let time = Math.max(0, Math.floor(now));
  let random: bigint;
  if (time <= lastTime) {
    time = lastTime;
    random = (lastRandom + 1n) & RANDOM_MASK;
  } else {
    random = BigInt(`0x${randomBytes(10).toString('hex')}`);
  }
  lastTime = time;
  lastRandom = random;
  return `${prefix}_${encode(BigInt(time), 10)}${encode(random, 16)}`;
}

/** The creation time encoded in an id made by newId, in milliseconds. */
export function idTime(id: string): number {
  const body = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11);
  let value = 0;
  for (const char of body) value = value * 32 + ALPHABET.indexOf(char);
  return value;
}

function encode(value: bigint, length: number): string {
  let text = '';
  for (let i = 0; i < length; i++) {
    text = ALPHABET[Number(value & 31n)]! + text;
    value >>= 5n;
  }
  return text;
}

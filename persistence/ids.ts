import { randomFillSync } from 'node:crypto';

/** The id prefixes of docs/api.md ("Ids, times, money"), plus `evt` for webhook events, `ses` for sessions, `exp` for data exports and `upl` for upload intents. */
export type IdPrefix = 'evt' | 'gen' | 'ast' | 'key' | 'whk' | 'dlv' | 'ws' | 'usr' | 'inv' | 'txn' | 'dep' | 'top' | 'pay' | 'sub' | 'ses' | 'exp' | 'upl';

// Crockford base32 in lower case: its characters are in ASCII order, so ids sort as text in time order.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
/** The random part is 80 bits, kept as two 40-bit halves (numbers, exact below 2^53): no BigInt per id. */
const HALF = 2 ** 40;

let lastTime = -1;
let lastHigh = 0;
let lastLow = 0;

/** Random bytes drawn from the CSPRNG a few thousand at a time: one call per 256 ids, not one per id. */
const pool = Buffer.alloc(10 * 256);
let poolAt = pool.length;

/**
 * `usr_01jh…`: a ULID-like id (48-bit millisecond time, 80 random bits, 26 characters) behind the prefix.
 * Ids made later sort after earlier ones; within one millisecond (or if the clock steps back) the random
 * part counts up, so ids made in one process are strictly increasing.
 */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  let time = Math.max(0, Math.floor(now));
  let high: number;
  let low: number;
  if (time <= lastTime) {
    time = lastTime;
    high = lastHigh;
    low = lastLow + 1;
    if (low === HALF) {
      low = 0;
      high = (high + 1) % HALF;
    }
  } else {
    if (poolAt === pool.length) {
      randomFillSync(pool);
      poolAt = 0;
    }
    high = pool.readUIntBE(poolAt, 5);
    low = pool.readUIntBE(poolAt + 5, 5);
    poolAt += 10;
  }
  lastTime = time;
  lastHigh = high;
  lastLow = low;
  return `${prefix}_${encode(time, 10)}${encode(high, 8)}${encode(low, 8)}`;
}

/** The creation time encoded in an id made by newId, in milliseconds. */
export function idTime(id: string): number {
  const body = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11);
  let value = 0;
  for (const char of body) value = value * 32 + ALPHABET.indexOf(char);
  return value;
}

function encode(value: number, length: number): string {
  let text = '';
  for (let i = 0; i < length; i++) {
    text = ALPHABET[value % 32]! + text;
    value = Math.floor(value / 32);
  }
  return text;
}

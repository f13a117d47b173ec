/**
 * Deterministic hashing and pseudo-random numbers for the local provider.
 *
 * `hashOf(...parts)` folds strings/numbers/bytes into a 32-bit unsigned seed (FNV-1a over a
 * length-prefixed encoding, so ['ab','c'] and ['a','bc'] differ); `rng(seed)` returns a
 * mulberry32 generator of floats in [0, 1). Same inputs, same sequence, on every platform.
 */
export type Rng = () => number;

export function hashOf(...parts: Array<string | number | Uint8Array | undefined>): number {
  let h = 0x811c9dc5;
  const mix = (byte: number) => {
    h ^= byte & 0xff;
    h = Math.imul(h, 0x01000193) >>> 0;
  };
  for (const part of parts) {
    const bytes =
      part === undefined
        ? new Uint8Array(0)
        : typeof part === 'string'
          ? Buffer.from(part, 'utf8')
          : typeof part === 'number'
            ? Buffer.from(String(part), 'utf8')
            : part;
    const len = bytes.length;
    mix(len);
    mix(len >>> 8);
    mix(len >>> 16);
    mix(len >>> 24);
    mix(part === undefined ? 0 : typeof part === 'string' ? 1 : typeof part === 'number' ? 2 : 3);
    for (let i = 0; i < bytes.length; i++) mix(bytes[i]!);
  }
  // Final avalanche so nearby inputs give far-apart seeds.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

export function rng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const pick = <T>(r: Rng, items: readonly T[]): T => items[Math.floor(r() * items.length) % items.length]!;

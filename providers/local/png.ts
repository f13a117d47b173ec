/**
 * A minimal PNG writer: `await encodePng(width, height, rgb)` takes 8-bit RGB pixels, row by
 * row (width * height * 3 bytes), and returns a complete PNG (signature, IHDR, one zlib IDAT,
 * IEND, each chunk with its CRC-32). Rows use the Sub filter, which suits smooth gradients.
 * Compression runs on libuv's thread pool, off the event loop. Output is byte-for-byte stable
 * for the same pixels (fixed zlib level).
 */
import { promisify } from 'node:util';
import { deflate } from 'node:zlib';

const deflateAsync = promisify(deflate);

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

export function crc32(...parts: Uint8Array[]): number {
  let c = 0xffffffff;
  for (const part of parts) for (let i = 0; i < part.length; i++) c = CRC_TABLE[(c ^ part[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(head.subarray(4), data), 0);
  return Buffer.concat([head, data, crc]);
}

export async function encodePng(width: number, height: number, rgb: Uint8Array): Promise<Buffer> {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) throw new RangeError(`bad PNG size ${width}x${height}`);
  const stride = width * 3;
  if (rgb.length !== stride * height) throw new RangeError(`expected ${stride * height} RGB bytes, got ${rgb.length}`);

  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type: truecolour RGB
  ihdr[10] = 0; // deflate
  ihdr[11] = 0; // adaptive filtering
  ihdr[12] = 0; // no interlace

  const raw = new Uint8Array((stride + 1) * height);
  for (let y = 0; y < height; y++) {
    const src = y * stride;
    const dst = y * (stride + 1) + 1;
    raw[dst - 1] = 1; // Sub: each byte minus the byte of the pixel to its left
    raw[dst] = rgb[src]!;
    raw[dst + 1] = rgb[src + 1]!;
    raw[dst + 2] = rgb[src + 2]!;
    for (let x = 3; x < stride; x++) raw[dst + x] = rgb[src + x]! - rgb[src + x - 3]!; // a Uint8Array wraps mod 256
  }

  return Buffer.concat([SIGNATURE, chunk('IHDR', ihdr), chunk('IDAT', await deflateAsync(raw, { level: 6 })), chunk('IEND', Buffer.alloc(0))]);
}

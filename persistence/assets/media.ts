/**
 * The file types the service keeps as assets, what their first bytes look like, and the image sizes that
 * can be read from them. Pure functions: no I/O.
 */
import type { MediaType } from '../entities/asset.ts';

interface FileType {
  mediaType: MediaType;
  /** File name extensions of the type (a declared file name with another known extension is refused). */
  extensions: string[];
}

/** Every content type an upload may declare, by its canonical name. */
export const FILE_TYPES: Readonly<Record<string, FileType>> = {
  'image/png': { mediaType: 'image', extensions: ['png'] },
  'image/jpeg': { mediaType: 'image', extensions: ['jpg', 'jpeg', 'jpe', 'jfif'] },
  'image/gif': { mediaType: 'image', extensions: ['gif'] },
  'image/webp': { mediaType: 'image', extensions: ['webp'] },
  'video/mp4': { mediaType: 'video', extensions: ['mp4', 'm4v'] },
  'video/quicktime': { mediaType: 'video', extensions: ['mov', 'qt'] },
  'video/webm': { mediaType: 'video', extensions: ['webm'] },
  'audio/wav': { mediaType: 'audio', extensions: ['wav', 'wave'] },
  'audio/mpeg': { mediaType: 'audio', extensions: ['mp3'] },
  'audio/ogg': { mediaType: 'audio', extensions: ['ogg', 'oga', 'opus'] },
};
export const CONTENT_TYPES = Object.keys(FILE_TYPES);

/** Other names clients commonly send for the same types. */
const ALIASES: Readonly<Record<string, string>> = {
  'image/jpg': 'image/jpeg',
  'image/pjpeg': 'image/jpeg',
  'audio/x-wav': 'audio/wav',
  'audio/wave': 'audio/wav',
  'audio/vnd.wave': 'audio/wav',
  'audio/mp3': 'audio/mpeg',
  'audio/x-mpeg': 'audio/mpeg',
  'application/ogg': 'audio/ogg',
};

/** The canonical name of a declared content type (lower case, parameters dropped), or undefined if it is not kept. */
export function canonicalContentType(declared: string): string | undefined {
  const bare = declared.split(';')[0]!.trim().toLowerCase();
  const name = ALIASES[bare] ?? bare;
  return FILE_TYPES[name] ? name : undefined;
}

export function mediaTypeOf(contentType: string): MediaType | undefined {
  return FILE_TYPES[contentType]?.mediaType;
}

/** The content type a known extension of `filename` stands for, if any. */
export function contentTypeOfFilename(filename: string): string | undefined {
  const dot = filename.lastIndexOf('.');
  if (dot < 0) return undefined;
  const extension = filename.slice(dot + 1).toLowerCase();
  for (const [contentType, type] of Object.entries(FILE_TYPES)) if (type.extensions.includes(extension)) return contentType;
  return undefined;
}

/** How many leading bytes sniffing and size reading look at. */
export const SNIFF_BYTES = 64 * 1024;

/**
 * The content type the first bytes of a file show (magic numbers), among FILE_TYPES, or undefined when
 * they show none of them (text, HTML, an executable, ...).
 */
export function sniffContentType(bytes: Uint8Array): string | undefined {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (starts(b, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (starts(b, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (ascii(b, 0, 'GIF87a') || ascii(b, 0, 'GIF89a')) return 'image/gif';
  if (ascii(b, 0, 'RIFF') && ascii(b, 8, 'WEBP')) return 'image/webp';
  if (ascii(b, 0, 'RIFF') && ascii(b, 8, 'WAVE')) return 'audio/wav';
  if (ascii(b, 4, 'ftyp')) {
    const brand = b.toString('latin1', 8, 12);
    if (brand === 'qt  ') return 'video/quicktime';
    if (/^(M4A |M4B |M4P |F4A )$/.test(brand)) return undefined;
    return b.length >= 12 ? 'video/mp4' : undefined;
  }
  // Older QuickTime files begin with another atom than ftyp.
  if (b.length >= 8 && ['moov', 'mdat', 'wide', 'pnot', 'skip'].includes(b.toString('latin1', 4, 8))) return 'video/quicktime';
  if (starts(b, [0x1a, 0x45, 0xdf, 0xa3])) return b.subarray(0, 64).includes('webm', 0, 'latin1') ? 'video/webm' : undefined;
  if (ascii(b, 0, 'OggS')) return 'audio/ogg';
  if (ascii(b, 0, 'ID3')) return 'audio/mpeg';
  // An MPEG audio frame header: 11 sync bits, then a layer that is not the reserved 00.
  if (b.length >= 2 && b[0] === 0xff && (b[1]! & 0xe0) === 0xe0 && (b[1]! & 0x06) !== 0) return 'audio/mpeg';
  return undefined;
}

/** Width and height of an image, read from its header, when the first bytes hold them. */
export function imageSize(bytes: Uint8Array, contentType: string): { width: number; height: number } | undefined {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (contentType) {
    case 'image/png':
      if (b.length >= 24 && ascii(b, 12, 'IHDR')) return positive(b.readUInt32BE(16), b.readUInt32BE(20));
      return undefined;
    case 'image/gif':
      if (b.length >= 10) return positive(b.readUInt16LE(6), b.readUInt16LE(8));
      return undefined;
    case 'image/webp':
      return webpSize(b);
    case 'image/jpeg':
      return jpegSize(b);
    default:
      return undefined;
  }
}

function webpSize(b: Buffer): { width: number; height: number } | undefined {
  if (b.length < 30) return undefined;
  const chunk = b.toString('latin1', 12, 16);
  if (chunk === 'VP8 ' && b[23] === 0x9d && b[24] === 0x01 && b[25] === 0x2a) return positive(b.readUInt16LE(26) & 0x3fff, b.readUInt16LE(28) & 0x3fff);
  if (chunk === 'VP8L' && b[20] === 0x2f) {
    const bits = b.readUInt32LE(21);
    return positive((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1);
  }
  if (chunk === 'VP8X') return positive(b.readUIntLE(24, 3) + 1, b.readUIntLE(27, 3) + 1);
  return undefined;
}

function jpegSize(b: Buffer): { width: number; height: number } | undefined {
  let offset = 2;
  while (offset + 9 < b.length) {
    if (b[offset] !== 0xff) return undefined;
    const marker = b[offset + 1]!;
    if (marker === 0xff) {
      offset++;
      continue;
    }
    // Start-of-frame markers hold the size; C4 (DHT), C8 (JPG) and CC (DAC) are not frames.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return positive(b.readUInt16BE(offset + 7), b.readUInt16BE(offset + 5));
    }
    if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
      offset += 2;
      continue;
    }
    offset += 2 + b.readUInt16BE(offset + 2);
  }
  return undefined;
}

function positive(width: number, height: number): { width: number; height: number } | undefined {
  return width > 0 && height > 0 ? { width, height } : undefined;
}

function starts(b: Buffer, prefix: number[]): boolean {
  return b.length >= prefix.length && prefix.every((byte, i) => b[i] === byte);
}

function ascii(b: Buffer, at: number, text: string): boolean {
  return b.length >= at + text.length && b.toString('latin1', at, at + text.length) === text;
}

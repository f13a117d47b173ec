/**
 * Content types from magic bytes, and image sizes from headers, without decoding.
 *
 * `sniffContentType(bytes)` → 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp' |
 * 'audio/wav' | 'audio/mpeg' | 'audio/ogg' | 'video/mp4' | 'audio/mp4' | 'video/quicktime' |
 * 'video/webm' | 'video/x-matroska', or undefined when none matches. MP3 is recognised by an
 * ID3v2 tag or an MPEG audio frame sync; MP4/MOV by the `ftyp` box (its major brand tells
 * MOV `qt  ` and audio-only `M4A ` apart); WEBM by the EBML header and its `webm` doctype.
 *
 * `imageDimensions(bytes)` reads width and height from PNG, GIF, JPEG and WEBP headers.
 */
const ascii = (bytes: Uint8Array, start: number, length: number) =>
  bytes.length >= start + length ? Buffer.from(bytes.subarray(start, start + length)).toString('latin1') : '';

export function sniffContentType(bytes: Uint8Array): string | undefined {
  const b = (i: number) => bytes[i] ?? -1;
  if (b(0) === 0x89 && ascii(bytes, 1, 3) === 'PNG' && b(4) === 0x0d && b(5) === 0x0a && b(6) === 0x1a && b(7) === 0x0a) return 'image/png';
  if (b(0) === 0xff && b(1) === 0xd8 && b(2) === 0xff) return 'image/jpeg';
  const gif = ascii(bytes, 0, 6);
  if (gif === 'GIF87a' || gif === 'GIF89a') return 'image/gif';
  if (ascii(bytes, 0, 4) === 'RIFF') {
    const kind = ascii(bytes, 8, 4);
    if (kind === 'WEBP') return 'image/webp';
    if (kind === 'WAVE') return 'audio/wav';
  }
  if (ascii(bytes, 0, 4) === 'OggS') return 'audio/ogg';
  if (ascii(bytes, 4, 4) === 'ftyp') {
    const brand = ascii(bytes, 8, 4);
    if (brand === 'qt  ') return 'video/quicktime';
    if (brand === 'M4A ' || brand === 'M4B ') return 'audio/mp4';
    return 'video/mp4';
  }
  if (b(0) === 0x1a && b(1) === 0x45 && b(2) === 0xdf && b(3) === 0xa3) {
    return ascii(bytes, 0, Math.min(bytes.length, 64)).includes('webm') ? 'video/webm' : 'video/x-matroska';
  }
  if (ascii(bytes, 0, 3) === 'ID3') return 'audio/mpeg';
  // MPEG audio frame: 11 sync bits, a version that is not reserved (01), a layer that is not reserved (00, which is AAC's ADTS).
  if (b(0) === 0xff && (b(1) & 0xe0) === 0xe0 && ((b(1) >> 3) & 3) !== 1 && ((b(1) >> 1) & 3) !== 0) return 'audio/mpeg';
  return undefined;
}

export function imageDimensions(bytes: Uint8Array): { width: number; height: number } | undefined {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const type = sniffContentType(bytes);
  try {
    if (type === 'image/png' && ascii(bytes, 12, 4) === 'IHDR') return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
    if (type === 'image/gif') return { width: buf.readUInt16LE(6), height: buf.readUInt16LE(8) };
    if (type === 'image/webp') {
      const chunk = ascii(bytes, 12, 4);
      if (chunk === 'VP8 ') return { width: buf.readUInt16LE(26) & 0x3fff, height: buf.readUInt16LE(28) & 0x3fff };
      if (chunk === 'VP8L') {
        const bits = buf.readUInt32LE(21);
        return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
      }
      if (chunk === 'VP8X') return { width: buf.readUIntLE(24, 3) + 1, height: buf.readUIntLE(27, 3) + 1 };
      return undefined;
    }
    if (type === 'image/jpeg') {
      let at = 2;
      while (at + 9 < buf.length) {
        if (buf[at] !== 0xff) return undefined;
        const marker = buf[at + 1]!;
        if (marker === 0xff) {
          at += 1;
          continue;
        }
        // SOF0..SOF15 carry the frame size, except DHT (C4), JPG (C8) and DAC (CC).
        if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
          return { width: buf.readUInt16BE(at + 7), height: buf.readUInt16BE(at + 5) };
        }
        at += 2 + buf.readUInt16BE(at + 2);
      }
    }
  } catch {
    return undefined; // a truncated header
  }
  return undefined;
}

import type { Readable } from 'node:stream';

/**
 * Reads a stream whole, refusing more than `maxBytes`: past the limit the stream is destroyed (its late
 * errors ignored) and `tooLarge()` is thrown, so nothing larger than the limit is ever held in memory.
 */
export async function readLimited(stream: Readable, maxBytes: number, tooLarge: () => Error): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      stream.on('error', () => {});
      stream.destroy();
      throw tooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks, size);
}

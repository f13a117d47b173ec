import type { Database } from '../../persistence/database.ts';
import { findInputAssets } from '../../persistence/stores/assets.ts';
import type { BlobStore } from '../../persistence/blob-store/types.ts';
import { InputError, type InputResolver } from './input-resolver.ts';
import { readLimited } from '../../runtime/read-limited.ts';

export type UrlFetcher = (url: string) => Promise<Buffer>;

/** Largest input file read into memory for a provider. */
export const MAX_INPUT_BYTES = 64 * 1024 * 1024;

/**
 * Inputs as bytes: uploaded assets of the same workspace from the blob store, data URLs decoded, and
 * http(s) URLs through `fetchUrl` (the egress guard). A failure here fails the generation with a clear code.
 */
export function blobInputResolver(blobs: BlobStore, db: Database, fetchUrl: UrlFetcher): InputResolver {
  return {
    async resolve(workspaceId, inputs) {
      const images = [
        ...(await fromAssets(asList(inputs.imageAssetIds), 'image')),
        ...(await Promise.all(asList(inputs.imageUrls).map((url) => fromUrl(url)))),
      ];
      const videos = [
        ...(await fromAssets(asList(inputs.videoAssetIds), 'video')),
        ...(await Promise.all(asList(inputs.videoUrls).map((url) => fromUrl(url)))),
      ];
      return { images, videos };

      async function fromAssets(ids: string[], mediaType: 'image' | 'video'): Promise<Buffer[]> {
        if (ids.length === 0) return [];
        const rows = await findInputAssets(db, workspaceId, ids);
        return Promise.all(
          ids.map(async (id) => {
            const row = rows.find((r) => r.id === id);
            if (!row || row.mediaType !== mediaType)
              throw new InputError('input_unavailable', `Input asset ${id} is not a ${mediaType} of this workspace any more.`);
            const stream = await blobs.get(row.storageKey);
            if (!stream) throw new InputError('input_unavailable', `The bytes of input asset ${id} are missing.`);
            return readLimited(stream, MAX_INPUT_BYTES, () => new InputError('input_too_large', `Input asset ${id} is larger than ${MAX_INPUT_BYTES} bytes.`));
          }),
        );
      }
    },
  };

  async function fromUrl(url: string): Promise<Buffer> {
    const data = /^data:[^;,]+;base64,(.*)$/s.exec(url);
    if (data) return Buffer.from(data[1]!, 'base64');
    try {
      return await fetchUrl(url);
    } catch (error) {
      throw new InputError('input_fetch_failed', `Fetching ${url.slice(0, 200)} failed: ${(error as Error).message}`);
    }
  }
}

function asList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

import type { Database } from '../../persistence/database.ts';
import { storageRoomOf } from '../../persistence/stores/assets.ts';
import { newId } from '../../persistence/ids.ts';
import { assetStorageKey, type BlobStore } from '../../persistence/blob-store/types.ts';
import type { OutputStore, PreparedOutputs } from './output-store.ts';
import type { OutputFile } from '../../providers/provider.ts';
import type { PlanBook } from '../../domain/plans.ts';

export class OutputsOverStorageLimitError extends Error {
  constructor(
    readonly usedBytes: number,
    readonly limitBytes: number,
    readonly neededBytes: number,
  ) {
    super(`the outputs need ${neededBytes} bytes; ${usedBytes} of ${limitBytes} bytes of storage are used`);
    this.name = 'OutputsOverStorageLimitError';
  }
}

/** Output files go to the blob store first; their asset rows join the generation's terminal transaction. */
export function blobOutputStore(blobs: BlobStore, db: Database, now: () => number, plans: () => PlanBook): OutputStore {
  return {
    async prepare(workspaceId: string, generationId: string, files: OutputFile[]): Promise<PreparedOutputs> {
      if (files.length === 0) return { assetIds: [], assets: [], discard: async () => {} };
      const needed = files.reduce((sum, f) => sum + f.bytes.length, 0);
      const { usedBytes, limitBytes: limit } = await storageRoomOf(db, workspaceId, plans());
      if (usedBytes + needed > limit) throw new OutputsOverStorageLimitError(usedBytes, limit, needed);

      const stored: Array<{ id: string; key: string; file: OutputFile }> = [];
      try {
        for (const file of files) {
          const id = newId('ast', now());
          const key = assetStorageKey(workspaceId, id);
          await blobs.put(key, file.bytes, file.contentType);
          stored.push({ id, key, file });
        }
      } catch (error) {
        await Promise.allSettled(stored.map((s) => blobs.delete(s.key)));
        throw error;
      }
      return {
        assetIds: stored.map((s) => s.id),
        assets: stored.map(({ id, key, file }) => ({
          id,
          workspaceId,
          mediaType: file.mediaType,
          contentType: file.contentType,
          bytes: file.bytes.length,
          width: file.width ?? null,
          height: file.height ?? null,
          durationSeconds: file.durationSeconds ?? null,
          sourceGenerationId: generationId,
          storageKey: key,
          createdAt: new Date(now()),
          limitBytes: limit,
        })),
        async discard() {
          await Promise.allSettled(stored.map((s) => blobs.delete(s.key)));
        },
      };
    },
  };
}

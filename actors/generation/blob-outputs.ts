import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../persistence/ids.ts';
import { assetStorageKey, type BlobStore } from '../../persistence/blob-store/types.ts';
import { createAsset, storageLimitOf, storageUsage } from '../../persistence/assets/store.ts';
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
export function blobOutputStore(blobs: BlobStore, db: { em(): SqlEntityManager }, now: () => number, plans: () => PlanBook): OutputStore {
  return {
    async prepare(workspaceId: string, generationId: string, files: OutputFile[]): Promise<PreparedOutputs> {
      if (files.length === 0) return { assetIds: [], write: async () => {}, discard: async () => {} };
      const needed = files.reduce((sum, f) => sum + f.bytes.length, 0);
      const em = db.em();
      const [usage, limit] = await Promise.all([storageUsage(em, workspaceId), storageLimitOf(em, workspaceId, plans())]);
      if (usage.usedBytes + needed > limit) throw new OutputsOverStorageLimitError(usage.usedBytes, limit, needed);

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
        async write(em) {
          for (const { id, key, file } of stored) {
            await createAsset(em, {
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
            });
          }
        },
        async discard() {
          await Promise.allSettled(stored.map((s) => blobs.delete(s.key)));
        },
      };
    },
  };
}

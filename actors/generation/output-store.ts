import type { NewAsset } from '../../persistence/assets/store.ts';
import type { OutputFile } from '../../providers/provider.ts';

/**
 * Where a generation's output files go. `prepare` stores the bytes before the terminal commit and returns
 * the asset ids plus the rows that record them, written in the generation's terminal transaction; if that
 * transaction fails, `discard` removes the bytes again.
 */
export interface OutputStore {
  prepare(workspaceId: string, generationId: string, files: OutputFile[]): Promise<PreparedOutputs>;
}

export interface PreparedOutputs {
  assetIds: string[];
  /** The asset rows, written with the settlement (actors/workspace/settlements.ts). */
  assets: NewAsset[];
  discard(): Promise<void>;
}

/** Until a blob store is configured, only text outputs can be kept; file outputs fail clearly. */
export const noOutputStore: OutputStore = {
  async prepare(_workspaceId, _generationId, files) {
    if (files.length > 0) throw new OutputStoreUnavailableError();
    return { assetIds: [], assets: [], discard: async () => {} };
  },
};

export class OutputStoreUnavailableError extends Error {
  constructor() {
    super('no blob store is configured for output files');
    this.name = 'OutputStoreUnavailableError';
  }
}

import type { Mode } from '../domain/catalog/models.ts';

/** What a provider is asked to make. Inputs are already fetched and checked. */
export interface ProviderJob {
  generationId: string;
  mode: Mode;
  modelId: string;
  params: Record<string, unknown>;
  inputs: { images: Buffer[]; videos: Buffer[] };
}

export interface OutputFile {
  bytes: Buffer;
  contentType: string;
  mediaType: 'image' | 'audio' | 'video';
  width?: number;
  height?: number;
  durationSeconds?: number;
}

/** What a provider reports about a job it accepted; failures are data, never exceptions. */
export type ProviderUpdate =
  | { type: 'running' }
  /** `usage`: the tokens a text job used, as the provider counted them (a token-priced job is charged by them). */
  | { type: 'succeeded'; textOutput?: string; files: OutputFile[]; usage?: { inputTokens: number; outputTokens: number } }
  | { type: 'failed'; errorCode: string; errorMessage: string };

/**
 * A provider adapter: `submit` hands a job over and resolves once the provider accepted it; progress and
 * the result come later through `report`, from polling or a callback, however the provider works.
 *
 * At least once: a job in flight when the service's process died is submitted again after the restart
 * (up to MAX_ATTEMPTS hand-overs in all, state.ts), since neither built-in adapter has a job that can be
 * looked up from another process (the local provider's jobs live in the service's process, and the
 * OpenAI-compatible endpoints answer in the request that made them). An adapter may thus see the same
 * generationId more than once; the workspace is charged once whatever it reports.
 */
export interface Provider {
  name: string;
  /** Jobs this provider takes at once, across all workspaces; undefined for no limit. Queued jobs wait while it is full. */
  maxConcurrentJobs?: number;
  submit(job: ProviderJob, report: (update: ProviderUpdate) => void): Promise<{ providerJobId: string }>;
  cancel(providerJobId: string): void;
}

export class ProviderRegistry {
  private readonly providers = new Map<string, Provider>();

  add(provider: Provider): this {
    this.providers.set(provider.name, provider);
    return this;
  }

  get(name: string): Provider | undefined {
    return this.providers.get(name);
  }

  has(name: string): boolean {
    return this.providers.has(name);
  }
}

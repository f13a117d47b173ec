import type { ModelCatalog } from './generation/catalog/index.ts';
import type { ProviderRegistry } from './generation/providers/provider.ts';
import type { OutputStore } from './generation/output-store.ts';
import type { InputResolver } from './generation/input-resolver.ts';
import type { WebhookDeps } from './webhook/deps.ts';

/** What the service hands its actors (ctx.deps): built once in runtime/service.ts. */
export interface ActorDeps {
  catalog: ModelCatalog;
  providers: ProviderRegistry;
  /** Queued jobs expire after this long (DECISIONS.md: 10 minutes by default). */
  queueTimeoutMs: number;
  /** Whether the operator paused generation platform-wide; queued jobs then wait. */
  generationPaused(): boolean;
  outputs: OutputStore;
  inputs: InputResolver;
  webhooks: WebhookDeps;
}

export function depsOf(ctx: { deps: unknown }): ActorDeps {
  return ctx.deps as ActorDeps;
}

import type { DeploymentRecord } from '../domain/catalog/index.ts';
import type { AdapterContext, ProviderAdapter } from './adapter.ts';
import { adapterProvider } from './adapter-provider.ts';
import { createAdapter } from './kinds.ts';
import type { Provider } from './provider.ts';

export interface DeploymentAdaptersOptions {
  /** Each configured kind's settings. */
  settings: ReadonlyMap<string, unknown>;
  /** A deployment by id (the catalog's, or one a reload removed). */
  deployment(id: string): DeploymentRecord | undefined;
  context(deploymentId: string): AdapterContext;
  /** Wraps each provider made (metrics, labelled with its deployment). */
  metered(provider: Provider, deployment: DeploymentRecord): Provider;
  jobTimeoutMs: number;
  now(): number;
}

/**
 * One adapter per catalog deployment of a configured kind, made when a job first needs it and kept: its
 * polls and sockets follow the deployment's jobs. A deployment whose target a reload changed gets a new
 * adapter for new jobs; the old one goes on following the jobs it has until the service stops.
 */
export class DeploymentAdapters {
  private readonly live = new Map<string, { adapter: ProviderAdapter; provider: Provider }>();
  private readonly retired: ProviderAdapter[] = [];

  constructor(private readonly options: DeploymentAdaptersOptions) {}

  get(deploymentId: string): Provider | undefined {
    const made = this.live.get(deploymentId);
    if (made) return made.provider;
    const deployment = this.options.deployment(deploymentId);
    if (!deployment) return undefined;
    const settings = this.options.settings.get(deployment.provider);
    if (settings === undefined) return undefined;
    const adapter = createAdapter(deployment.provider, settings, { id: deployment.id, target: deployment.target }, this.options.context(deployment.id));
    const provider = this.options.metered(adapterProvider(deployment.provider, adapter, this.options.jobTimeoutMs, this.options.now), deployment);
    this.live.set(deploymentId, { adapter, provider });
    return provider;
  }

  /** The deployment's target changed: new jobs get a new adapter. */
  retire(deploymentId: string): void {
    const made = this.live.get(deploymentId);
    if (!made) return;
    this.live.delete(deploymentId);
    this.retired.push(made.adapter);
  }

  async close(): Promise<void> {
    const all = [...[...this.live.values()].map((m) => m.adapter), ...this.retired];
    this.live.clear();
    await Promise.allSettled(all.map((adapter) => adapter.close()));
  }
}

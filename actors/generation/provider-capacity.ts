/**
 * How many jobs each provider has in flight, across all workspaces, against the limit it declares
 * (Provider.maxConcurrentJobs). Workspace actors take a provider slot when they let a queued job start
 * and give it back when the job ends; a workspace refused a slot is told to schedule again when one frees.
 * In memory, per process: the limit applies to each node's jobs.
 */
export class ProviderCapacity {
  protected readonly held = new Map<string, Set<string>>();
  protected readonly providerOf = new Map<string, string>();
  protected readonly waiting = new Map<string, Set<string>>();

  constructor(
    protected readonly limitOf: (provider: string) => number | undefined,
    /** Called with each workspace that waited for this provider when one of its slots frees. */
    protected readonly wake: (workspaceId: string) => void,
  ) {}

  /** Takes a slot for the job if the provider has one free; otherwise the workspace waits for one. */
  tryAcquire(provider: string, generationId: string, workspaceId: string): boolean {
    const held = this.setOf(provider);
    if (held.has(generationId)) return true;
    const limit = this.limitOf(provider);
    if (limit !== undefined && held.size >= limit) {
      let waiting = this.waiting.get(provider);
      if (!waiting) this.waiting.set(provider, (waiting = new Set()));
      waiting.add(workspaceId);
      return false;
    }
    held.add(generationId);
    this.providerOf.set(generationId, provider);
    return true;
  }

  /** Counts a job already in flight (a workspace actor reloading its state), whatever the limit. */
  hold(provider: string, generationId: string): void {
    this.setOf(provider).add(generationId);
    this.providerOf.set(generationId, provider);
  }

  /** Gives the job's slot back, if it held one, and wakes the workspaces waiting for that provider. */
  release(generationId: string): void {
    const provider = this.providerOf.get(generationId);
    if (provider === undefined) return;
    this.providerOf.delete(generationId);
    this.held.get(provider)?.delete(generationId);
    const waiting = this.waiting.get(provider);
    if (!waiting || waiting.size === 0) return;
    this.waiting.delete(provider);
    for (const workspaceId of waiting) this.wake(workspaceId);
  }

  inFlight(provider: string): number {
    return this.held.get(provider)?.size ?? 0;
  }

  protected setOf(provider: string): Set<string> {
    let held = this.held.get(provider);
    if (!held) this.held.set(provider, (held = new Set()));
    return held;
  }
}

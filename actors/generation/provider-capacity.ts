import { FairQueue, type Grant } from './fair-queue.ts';

/**
 * How many jobs each provider has in flight, across all workspaces, against the limit it declares
 * (Provider.maxConcurrentJobs), and who gets its next free slot: the workspaces waiting for a full
 * provider share it by weighted fair queuing (fair-queue.ts; weights are the plans' fairShareWeight).
 * Workspace actors take a slot when they let a queued job start and give it back when the job ends; a
 * workspace refused one waits with its oldest job's ask, and a freed slot is granted to one waiting
 * workspace (held for that job) which is then told to schedule again: no wake-up of every waiter.
 * In memory, per process: the limit applies to each node's jobs.
 */
export class ProviderCapacity {
  /** Providers with a limit: their slots and the asks waiting for them. */
  private readonly queues = new Map<string, FairQueue>();
  /** Providers without a limit: only counted. */
  private readonly counted = new Map<string, Set<string>>();
  /** The provider of each job that holds a slot or asked for one. */
  private readonly providerOf = new Map<string, string>();

  constructor(
    protected readonly limitOf: (provider: string) => number | undefined,
    /** Called with the workspace a slot was granted to: its actor schedules again and takes it. */
    protected readonly wake: (workspaceId: string) => void,
  ) {}

  /**
   * Takes a slot for the job if it was granted one, or if one is free and nobody waits; otherwise the
   * workspace waits, this job's ask queued (unless an earlier job of the workspace's waits already).
   * `weight`: the workspace's plan's fairShareWeight.
   */
  tryAcquire(provider: string, generationId: string, workspaceId: string, weight = 1): boolean {
    const limit = this.limitOf(provider);
    if (limit === undefined) return this.count(provider, generationId);
    const { holds, grants } = this.queueOf(provider).ask(workspaceId, generationId, weight, limit);
    this.providerOf.set(generationId, provider);
    this.wakeGranted(grants);
    return holds;
  }

  /**
   * Takes a slot for a job being created only if the fair order allows it now (a free slot, nobody
   * waiting); never makes the workspace wait (the job then queues and asks when it is scheduled).
   */
  acquireIfFree(provider: string, generationId: string, workspaceId: string, weight = 1): boolean {
    const limit = this.limitOf(provider);
    if (limit === undefined) return this.count(provider, generationId);
    if (!this.queueOf(provider).takeIfFree(workspaceId, generationId, weight, limit)) return false;
    this.providerOf.set(generationId, provider);
    return true;
  }

  /** Counts a job already in flight (a workspace actor reloading its state), whatever the limit. */
  hold(provider: string, generationId: string): void {
    if (this.limitOf(provider) === undefined) this.count(provider, generationId);
    else this.queueOf(provider).hold(generationId);
    this.providerOf.set(generationId, provider);
  }

  /** Gives the job's slot back (or withdraws its ask) and grants the free slots to the next workspaces. */
  release(generationId: string): void {
    const provider = this.providerOf.get(generationId);
    if (provider === undefined) return;
    this.providerOf.delete(generationId);
    if (this.counted.get(provider)?.delete(generationId)) return;
    const queue = this.queues.get(provider);
    if (queue) this.wakeGranted(queue.release(generationId, this.limitOf(provider) ?? Number.POSITIVE_INFINITY));
  }

  inFlight(provider: string): number {
    return (this.queues.get(provider)?.holding ?? 0) + (this.counted.get(provider)?.size ?? 0);
  }

  private count(provider: string, generationId: string): boolean {
    let jobs = this.counted.get(provider);
    if (!jobs) this.counted.set(provider, (jobs = new Set()));
    jobs.add(generationId);
    this.providerOf.set(generationId, provider);
    return true;
  }

  private queueOf(provider: string): FairQueue {
    let queue = this.queues.get(provider);
    if (!queue) this.queues.set(provider, (queue = new FairQueue()));
    return queue;
  }

  private wakeGranted(grants: Grant[]): void {
    for (const grant of grants) this.wake(grant.workspaceId);
  }
}

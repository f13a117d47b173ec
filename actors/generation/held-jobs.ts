/**
 * Cluster mode: the jobs in flight at a crash that this node recovered while generation was paused (the
 * emergency stop), and holds: durable as reserved, submitted or running, but at no provider. The drain
 * before a handover counts a shard's jobs in flight from the database to wait for those at a provider;
 * these it must not wait for (nothing would end them), so it leaves them out by id.
 *
 * A job leaves this set, synchronously, at the moment its actor decides to hand it to its provider, before
 * any write: from then on the drain counts it. `version` moves on each such release, so a count of jobs in
 * flight made before it is not reused after it (in-flight-by-shard.ts).
 */
export class HeldJobs {
  private readonly held = new Map<string, string>();
  private releases = 0;

  /** The job is held: recovered while generation was paused, handed to no provider. */
  hold(generationId: string, workspaceId: string): void {
    this.held.set(generationId, workspaceId);
  }

  /** The job is about to go to its provider (or was settled): the drain counts it from now on. */
  release(generationId: string): void {
    if (this.held.delete(generationId)) this.releases++;
  }

  /** The held jobs of the workspaces that match are forgotten (their shard went to another node, which holds them now). */
  forget(matches: (workspaceId: string) => boolean): void {
    for (const [generationId, workspaceId] of this.held) if (matches(workspaceId)) this.held.delete(generationId);
  }

  /** The ids held now. */
  ids(): string[] {
    return [...this.held.keys()];
  }

  /** Moves on every release. */
  get version(): number {
    return this.releases;
  }
}

import type { Lease } from '../../persistence/cluster/leases.ts';
import type { ActorOwnership } from '../actor-directory.ts';
import { sleep, systemClock, type Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import { Lru } from '../lru.ts';
import { runRecovery, type RecoveryTask } from '../recovery.ts';
import type { ClusterNode, ShardLossReason } from './cluster-node.ts';
import { shardOf } from './shard.ts';

/** Workspaces whose shard is remembered (a number each; the least recently used is forgotten first). */
const SHARD_MEMO_SIZE = 16_384;

export interface ShardHostOptions {
  shardCount: number;
  logger: Logger;
  /** The recovery of one shard's work (its unfinished generations, its pending deliveries), run when it is gained. */
  recoverShard: (scope: { shard: number; shardCount: number }) => RecoveryTask[];
  /** Stops the local actors of the shard's workspaces; with drainMs, after their mailboxes empty (at most that long). */
  retire: (matches: (workspaceId: string) => boolean, drainMs: number) => Promise<number>;
  /** Resolves when every write queued so far has committed or failed. */
  flushWrites: () => Promise<void>;
  /** How long a shard given up on purpose waits for its jobs in flight to end and its actors' mailboxes to empty. */
  drainMs: number;
  /** How many of the shard's jobs are in flight (handed to their provider, not yet ended). */
  jobsInFlight?: (scope: { shard: number; shardCount: number }) => Promise<number>;
  /** How many webhook attempts of the workspaces that match are on the wire. */
  attemptsInFlight?: (matches: (workspaceId: string) => boolean) => number;
  /** Told when a shard is lost, whatever the reason, after its actors were told to stop: per-shard state of the node goes. */
  shardLost?: (matches: (workspaceId: string) => boolean) => void;
  /** First wait before a failed recovery of a gained shard is tried again (doubling, at most 30 s). */
  retryMs: number;
  /** The drain's deadline and polls and the recovery's backoff run on it (default: the system clock). */
  clock?: Clock;
}

/**
 * What a node does with the shards its ClusterNode gains and loses: recovers a gained shard's work (only
 * that shard's rows), stops a lost shard's actors at once, and drains a shard before giving it up on
 * purpose (mailboxes emptied, writes flushed, actors stopped; then the node hands the lease over).
 * Actors ask it, through ActorOwnership, whether this node runs a workspace and under which lease.
 */
export class ShardHost implements ActorOwnership {
  private node: ClusterNode | undefined;
  private readonly recoveries = new Set<Promise<void>>();
  /** Each actor message and each routed request asks for its workspace's shard: a SHA-256 computed once per workspace. */
  private readonly shards = new Lru<string, number>(SHARD_MEMO_SIZE);

  private readonly clock: Clock;

  constructor(private readonly options: ShardHostOptions) {
    this.clock = options.clock ?? systemClock;
  }

  shardOf(workspaceId: string): number {
    let shard = this.shards.get(workspaceId);
    if (shard === undefined) {
      shard = shardOf(workspaceId, this.options.shardCount);
      this.shards.set(workspaceId, shard);
    }
    return shard;
  }

  claimFor(workspaceId: string): Lease | undefined {
    return this.node?.owns(this.shardOf(workspaceId));
  }

  runsHere(workspaceId: string): boolean {
    return this.claimFor(workspaceId) !== undefined;
  }

  /** Whether the workspace's shard is being drained before a handover (its queued jobs wait for the next owner). */
  handingOver(workspaceId: string): boolean {
    return this.node?.isHandingOver(this.shardOf(workspaceId)) ?? false;
  }

  /**
   * The `drain` hook of the ClusterNode. While the shard drains, its workspaces start no queued job and
   * no webhook attempt; the jobs and attempts in flight end here (at most drainMs), so the next owner
   * neither hands a job to its provider again nor posts a delivery twice.
   */
  readonly drain = async (lease: Lease): Promise<void> => {
    const deadline = this.clock.now() + this.options.drainMs;
    const scope = { shard: lease.shard, shardCount: this.options.shardCount };
    const inShard = (workspaceId: string) => this.shardOf(workspaceId) === lease.shard;
    let inFlight = 0;
    // A job whose actor took its slot before the drain began has its `reserved` write queued already:
    // committed first, it is counted below and waited for, not left for the next owner to submit again.
    await this.options.flushWrites();
    let attempts = 0;
    let retired = 0;
    for (;;) {
      while (this.options.jobsInFlight && (inFlight = await this.options.jobsInFlight(scope)) > 0 && this.clock.now() < deadline) {
        await sleep(this.clock, 50);
      }
      // Webhook attempts on the wire end here; their outcomes reach the mailboxes, which retire empties, and
      // the flush below commits them: the next owner finds those deliveries settled, not pending.
      while (this.options.attemptsInFlight && (attempts = this.options.attemptsInFlight(inShard)) > 0 && this.clock.now() < deadline) {
        await sleep(this.clock, 20);
      }
      retired += await this.options.retire(inShard, Math.max(0, deadline - this.clock.now()));
      await this.options.flushWrites();
      // A job whose start was on its way when the drain began (decided before it, its state not yet
      // committed, so not counted above) was handed to its provider while the mailboxes emptied: it is in
      // flight now, so wait for it as for the others rather than let the next owner submit it again.
      inFlight = this.options.jobsInFlight ? await this.options.jobsInFlight(scope) : 0;
      attempts = this.options.attemptsInFlight ? this.options.attemptsInFlight(inShard) : 0;
      if ((inFlight === 0 && attempts === 0) || this.clock.now() >= deadline) break;
    }
    if (inFlight > 0) this.options.logger.warn({ shard: lease.shard, inFlight }, 'jobs still in flight at the drain deadline: the next owner resubmits them');
    if (attempts > 0)
      this.options.logger.warn(
        { shard: lease.shard, attempts },
        'webhook attempts still on the wire at the drain deadline: the next owner may post them again',
      );
    this.options.logger.info({ shard: lease.shard, epoch: lease.epoch, retired }, 'shard drained before handover');
  };

  attach(node: ClusterNode): void {
    this.node = node;
    node.on('gained', (lease) => this.gained(lease));
    node.on('lost', (lease, reason) => this.lost(lease, reason));
  }

  /** Settles once the recoveries of every shard gained so far have run. */
  async recovered(): Promise<void> {
    while (this.recoveries.size > 0) await Promise.allSettled([...this.recoveries]);
  }

  private gained(lease: Lease): void {
    this.options.logger.info({ shard: lease.shard, epoch: lease.epoch }, 'shard gained');
    const run = this.recover(lease);
    this.recoveries.add(run);
    void run.finally(() => this.recoveries.delete(run));
  }

  /** Recovers the shard's work; a failure (database unreachable…) is retried while this node still holds the shard at that epoch. */
  private async recover(lease: Lease): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await runRecovery(this.options.recoverShard({ shard: lease.shard, shardCount: this.options.shardCount }), this.options.logger);
        return;
      } catch (error) {
        const held = this.node?.owns(lease.shard)?.epoch === lease.epoch;
        this.options.logger.error(
          { err: error, shard: lease.shard, attempt },
          held ? 'recovery of a gained shard failed; retrying' : 'recovery of a gained shard failed; the shard is gone',
        );
        if (!held) return;
        await sleep(this.clock, Math.min(30_000, this.options.retryMs * 2 ** (attempt - 1)));
      }
    }
  }

  private lost(lease: Lease, reason: ShardLossReason): void {
    this.options.logger.info({ shard: lease.shard, epoch: lease.epoch, reason }, 'shard lost');
    const matches = (workspaceId: string) => this.shardOf(workspaceId) === lease.shard;
    void this.options.retire(matches, 0);
    this.options.shardLost?.(matches);
  }
}

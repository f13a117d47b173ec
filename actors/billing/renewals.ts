import type { Clock, Timer } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { Actors } from '../kinds.ts';
import type { Database } from '../../persistence/database.ts';
import { ShardNotOwnedError } from '../../runtime/actor-directory.ts';
import type { ShardScope } from '../../persistence/cluster/shard-sql.ts';
import { liveSubscriptions } from '../../persistence/stores/billing.ts';

const RETRY_MS = 60_000;

/**
 * One timer on the clock per live subscription, at the end of its period. When it fires, the workspace
 * actor renews (or ends) the subscription and says when it is next due. At start-up every live
 * subscription is scheduled again, so renewals that fell due while the service was down run at once.
 */
export class RenewalScheduler {
  private readonly timers = new Map<string, { timer: Timer; workspaceId: string }>();
  private stopped = false;

  constructor(private readonly deps: { clock: Clock; logger: Logger; db: Database; actors: Actors }) {}

  /** Schedules every live subscription (cluster mode: those of one shard, just gained); returns how many. */
  async start(scope?: ShardScope): Promise<number> {
    const subscriptions = await liveSubscriptions(this.deps.db, scope);
    for (const s of subscriptions) this.schedule(s.workspaceId, s.id, s.currentPeriodEnd.getTime());
    return subscriptions.length;
  }

  schedule(workspaceId: string, subscriptionId: string, at: number): void {
    if (this.stopped) return;
    this.timers.get(subscriptionId)?.timer.cancel();
    const entry = {
      workspaceId,
      timer: this.deps.clock.setTimer(() => {
        if (this.timers.get(subscriptionId) === entry) this.timers.delete(subscriptionId);
        void this.renew(workspaceId, subscriptionId);
      }, at - this.deps.clock.now()),
    };
    this.timers.set(subscriptionId, entry);
  }

  /**
   * Cluster mode: drops the timers of the workspaces that match (a shard this node lost); their next owner
   * scheduled them when it gained the shard. Returns how many.
   */
  cancelWhere(matches: (workspaceId: string) => boolean): number {
    let cancelled = 0;
    for (const [subscriptionId, entry] of this.timers) {
      if (!matches(entry.workspaceId)) continue;
      entry.timer.cancel();
      this.timers.delete(subscriptionId);
      cancelled++;
    }
    return cancelled;
  }

  private async renew(workspaceId: string, subscriptionId: string): Promise<void> {
    if (this.stopped) return;
    try {
      const reply = await this.deps.actors.ask('ws', workspaceId, { type: 'renew', subscriptionId });
      if (reply.nextAt !== null) this.schedule(workspaceId, subscriptionId, reply.nextAt);
    } catch (error) {
      if (this.stopped) return;
      if (error instanceof ShardNotOwnedError) {
        // Cluster mode: the workspace moved to another node, which scheduled its subscriptions when it gained it.
        this.deps.logger.debug({ subscriptionId }, 'subscription renewal left to the node that now runs the workspace');
        return;
      }
      this.deps.logger.error({ err: error, subscriptionId }, 'subscription renewal failed; retrying in a minute');
      this.schedule(workspaceId, subscriptionId, this.deps.clock.now() + RETRY_MS);
    }
  }

  pending(): number {
    return this.timers.size;
  }

  stop(): void {
    this.stopped = true;
    for (const entry of this.timers.values()) entry.timer.cancel();
    this.timers.clear();
  }
}

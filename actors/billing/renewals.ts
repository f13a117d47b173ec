import type { Clock, Timer } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ActorMessenger } from '../../runtime/actor-behavior.ts';
import type { Database } from '../../persistence/database.ts';

const RETRY_MS = 60_000;

/** What a workspace actor answers to a due renewal: when the subscription is next due, or null once it has ended. */
export interface RenewReply {
  nextAt: number | null;
}

/**
 * One timer on the clock per live subscription, at the end of its period. When it fires, the workspace
 * actor renews (or ends) the subscription and says when it is next due. At start-up every live
 * subscription is scheduled again, so renewals that fell due while the service was down run at once.
 */
export class RenewalScheduler {
  private readonly timers = new Map<string, Timer>();
  private stopped = false;

  constructor(private readonly deps: { clock: Clock; logger: Logger; db: Database; actors: ActorMessenger }) {}

  /** Schedules every live subscription; returns how many. */
  async start(): Promise<number> {
    const rows = await this.deps.db.em().execute<Array<{ id: string; workspace_id: string; current_period_end: Date | string }>>(
      `select id, workspace_id, current_period_end from subscriptions where status = 'active'`,
    );
    for (const row of rows) this.schedule(row.workspace_id, row.id, new Date(row.current_period_end).getTime());
    return rows.length;
  }

  schedule(workspaceId: string, subscriptionId: string, at: number): void {
    if (this.stopped) return;
    this.timers.get(subscriptionId)?.cancel();
    const timer = this.deps.clock.setTimer(() => {
      if (this.timers.get(subscriptionId) === timer) this.timers.delete(subscriptionId);
      void this.renew(workspaceId, subscriptionId);
    }, at - this.deps.clock.now());
    this.timers.set(subscriptionId, timer);
  }

  private async renew(workspaceId: string, subscriptionId: string): Promise<void> {
    if (this.stopped) return;
    try {
      const reply = await this.deps.actors.ask<RenewReply>('ws', workspaceId, { type: 'renew', subscriptionId });
      if (reply.nextAt !== null) this.schedule(workspaceId, subscriptionId, reply.nextAt);
    } catch (error) {
      if (this.stopped) return;
      this.deps.logger.error({ err: error, subscriptionId }, 'subscription renewal failed; retrying in a minute');
      this.schedule(workspaceId, subscriptionId, this.deps.clock.now() + RETRY_MS);
    }
  }

  pending(): number {
    return this.timers.size;
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers.values()) timer.cancel();
    this.timers.clear();
  }
}

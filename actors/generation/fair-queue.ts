/**
 * Start-time fair queuing of one provider's slots between workspaces: pure state and rules, no I/O and no
 * clock (virtual time counts slots handed out, not seconds). ProviderCapacity keeps one per provider on a
 * single node; in cluster mode the same rules run in Redis (shared-provider-capacity.ts), and
 * test/cluster/fair-capacity.test.ts checks that both grant in the same order.
 *
 * Each workspace asks for one slot at a time (its oldest job the plan lets start); the ask is stamped with
 * a start tag S = max(V, F) and a finish tag S + cost, where F is the finish tag of the workspace's last
 * slot and cost = COST_SCALE / weight (its plan's fairShareWeight). A freed slot is granted to the ask with
 * the smallest finish tag (ties: the smaller workspace id, as a Redis sorted set orders them) and V moves
 * to that ask's start tag. A workspace that holds nothing and waits for nothing keeps no tag, so one that
 * comes back starts at V: it is not owed the past, and a backlog never puts anyone behind it for long.
 */

/** One job's cost at weight 1, in virtual-time units: integers, so Redis and this module count alike. */
export const COST_SCALE = 1_000_000;

export function costOf(weight: number): number {
  return Math.max(1, Math.round(COST_SCALE / Math.max(1, weight)));
}

export interface Grant {
  workspaceId: string;
  generationId: string;
}

interface Ask {
  generationId: string;
  start: number;
  finish: number;
}

export class FairQueue {
  private virtualTime = 0;
  /** The jobs holding a slot (granted or taken), each with its workspace ('' when not known: a recovered job). */
  private readonly holders = new Map<string, string>();
  private readonly heldBy = new Map<string, number>();
  private readonly asks = new Map<string, Ask>();
  /** The finish tag of each workspace's last slot, kept while it holds or waits. */
  private readonly tags = new Map<string, number>();

  /**
   * A job asks for a slot. `holds`: it has one now (taken, or granted earlier). Otherwise its workspace
   * waits: this job's ask is queued, unless an earlier job of the workspace already waits (one at a time).
   * `grants`: slots handed to waiting workspaces on the way (a limit raised since).
   */
  ask(workspaceId: string, generationId: string, weight: number, limit: number): { holds: boolean; grants: Grant[] } {
    const grants = this.grant(limit);
    if (this.holders.has(generationId)) return { holds: true, grants };
    if (this.asks.has(workspaceId)) return { holds: false, grants };
    const start = Math.max(this.virtualTime, this.tags.get(workspaceId) ?? 0);
    const finish = start + costOf(weight);
    if (this.asks.size === 0 && this.holders.size < limit) {
      this.virtualTime = Math.max(this.virtualTime, start);
      this.tags.set(workspaceId, finish);
      this.take(generationId, workspaceId);
      this.rebase();
      return { holds: true, grants };
    }
    this.asks.set(workspaceId, { generationId, start, finish });
    return { holds: false, grants };
  }

  /** Takes a slot only if one is free and nobody waits (the fair order allows it now); never queues an ask. */
  takeIfFree(workspaceId: string, generationId: string, weight: number, limit: number): boolean {
    if (this.holders.has(generationId)) return true;
    if (this.asks.size > 0 || this.holders.size >= limit) return false;
    return this.ask(workspaceId, generationId, weight, limit).holds;
  }

  /** Counts a job already in flight (a workspace reloading its state), whatever the limit. */
  hold(generationId: string, workspaceId = ''): void {
    if (!this.holders.has(generationId)) this.take(generationId, workspaceId);
  }

  /**
   * The job ended (or gave its slot back): its slot is freed, or its workspace's ask withdrawn if it was
   * still waiting; the free slots go to the waiting workspaces in fair order.
   */
  release(generationId: string, limit: number): Grant[] {
    for (const [workspaceId, ask] of this.asks) {
      if (ask.generationId !== generationId) continue;
      this.asks.delete(workspaceId);
      this.forgetIdle(workspaceId);
      break;
    }
    const workspaceId = this.holders.get(generationId);
    if (workspaceId !== undefined) {
      this.holders.delete(generationId);
      const left = (this.heldBy.get(workspaceId) ?? 0) - 1;
      if (left > 0) this.heldBy.set(workspaceId, left);
      else this.heldBy.delete(workspaceId);
      this.forgetIdle(workspaceId);
    }
    return this.grant(limit);
  }

  /** Hands free slots to the waiting workspaces, smallest finish tag first. */
  grant(limit: number): Grant[] {
    const grants: Grant[] = [];
    while (this.holders.size < limit && this.asks.size > 0) {
      let head: [string, Ask] | undefined;
      for (const entry of this.asks) {
        if (!head || entry[1].finish < head[1].finish || (entry[1].finish === head[1].finish && entry[0] < head[0])) head = entry;
      }
      const [workspaceId, ask] = head!;
      this.asks.delete(workspaceId);
      this.virtualTime = Math.max(this.virtualTime, ask.start);
      this.tags.set(workspaceId, ask.finish);
      this.take(ask.generationId, workspaceId);
      grants.push({ workspaceId, generationId: ask.generationId });
    }
    this.rebase();
    return grants;
  }

  get holding(): number {
    return this.holders.size;
  }

  get waiting(): number {
    return this.asks.size;
  }

  /** The job that waits for this workspace, if any. */
  askOf(workspaceId: string): string | undefined {
    return this.asks.get(workspaceId)?.generationId;
  }

  /** The state as Redis keeps it, for comparing the two (virtual time, tags, asks by finish tag). */
  snapshot(): { virtualTime: number; tags: Record<string, number>; asks: Array<[string, string, number, number]>; holders: string[] } {
    return {
      virtualTime: this.virtualTime,
      tags: Object.fromEntries([...this.tags].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
      asks: [...this.asks]
        .map(([w, a]): [string, string, number, number] => [w, a.generationId, a.start, a.finish])
        .sort((x, y) => x[3] - y[3] || (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)),
      holders: [...this.holders.keys()].sort(),
    };
  }

  private take(generationId: string, workspaceId: string): void {
    this.holders.set(generationId, workspaceId);
    if (workspaceId !== '') this.heldBy.set(workspaceId, (this.heldBy.get(workspaceId) ?? 0) + 1);
  }

  /** A workspace that neither holds a slot nor waits owes nothing and is owed nothing: its tag goes. */
  private forgetIdle(workspaceId: string): void {
    if (workspaceId !== '' && !this.heldBy.has(workspaceId) && !this.asks.has(workspaceId)) this.tags.delete(workspaceId);
  }

  /**
   * With nobody waiting, virtual time goes back to 0 and the tags move with it (a tag at or below V means
   * the same as none), so the numbers stay small however long the provider runs.
   */
  private rebase(): void {
    if (this.asks.size > 0 || this.virtualTime === 0) return;
    for (const [workspaceId, tag] of this.tags) {
      const shifted = tag - this.virtualTime;
      if (shifted > 0) this.tags.set(workspaceId, shifted);
      else this.tags.delete(workspaceId);
    }
    this.virtualTime = 0;
  }
}

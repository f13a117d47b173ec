import type { Logger } from './logger.ts';
import { closeRedis, type RedisClient } from './redis.ts';

/**
 * One committed transition of a generation, as the live streams send it (docs/streaming.md). `seq` is the
 * index of the transition in the generation's timeline (0 is `queued`): with the generation id it names
 * the event everywhere, on every node and after a restart.
 */
export interface LiveTransition {
  workspaceId: string;
  generationId: string;
  seq: number;
  status: string;
  at: string;
  detail?: string;
  mode: string;
  project: string | null;
  terminal: boolean;
  /** The generation as committed by this transition (the API's detail shape). */
  generation: Record<string, unknown>;
}

export type LiveListener = (event: LiveTransition) => void;

/** The rows the actors publish: enough of a generation row to build a LiveTransition. */
export interface PublishedRow {
  id: string;
  workspaceId: string;
  status: string;
  mode: string;
  project: string | null;
  timeline: Array<{ status: string; at: string; detail?: string }>;
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);

/**
 * How long a workspace stays "watched" on a node after its last stream closed: its events keep going into
 * the node's replay window, so a client that reconnects within this time resumes without loss.
 */
export const WATCH_LINGER_MS = 5 * 60_000;
/** Events of a workspace kept for resumption (Last-Event-ID) on each node that watches it. */
export const WINDOW_EVENTS = 1_000;

interface Watched {
  listeners: Set<LiveListener>;
  /** The replay window, oldest first, and the position of each event id in it (ids: `<generationId>.<seq>`). */
  ring: LiveTransition[];
  start: number;
  lingerUntil: number;
}

export function eventIdOf(event: { generationId: string; seq: number }): string {
  return `${event.generationId}.${event.seq}`;
}

/**
 * The live transitions of generations, published by the actors after each commit and delivered to the
 * streams of this node. Without Redis they go from the actor to the listeners in process, and a transition
 * of a workspace no one watches on this node costs one map lookup. With Redis (REDIS_URL, and so in cluster
 * mode) each transition is one PUBLISH on one channel, and every node receives every transition on a
 * connection of its own: a stream on any node sees the actors of every node, in the order Redis received them.
 */
export class LiveEvents {
  private readonly watched = new Map<string, Watched>();
  private subscriber: RedisClient | undefined;
  private published = 0;

  private constructor(
    private readonly present: (row: never) => Record<string, unknown>,
    private readonly now: () => number,
    private readonly logger: Logger,
    private readonly redis: RedisClient | undefined,
    private readonly channel: string,
  ) {}

  /** `present` turns a committed row into the API's shape (the composition root gives the HTTP one). */
  static async start<R extends PublishedRow>(options: {
    present: (row: R) => Record<string, unknown>;
    now: () => number;
    logger: Logger;
    redis?: RedisClient;
    channel: string;
  }): Promise<LiveEvents> {
    const bus = new LiveEvents(options.present as (row: never) => Record<string, unknown>, options.now, options.logger, options.redis, options.channel);
    if (options.redis) {
      // A subscribed connection can do nothing else, so it gets its own.
      const subscriber = options.redis.duplicate();
      subscriber.on('error', (error: Error) => options.logger.warn({ err: error }, 'redis live-events subscriber connection error'));
      await subscriber.connect();
      await subscriber.subscribe(options.channel, (message) => {
        let event: LiveTransition;
        try {
          event = JSON.parse(message) as LiveTransition;
        } catch {
          return;
        }
        bus.deliver(event);
      });
      bus.subscriber = subscriber;
    }
    return bus;
  }

  /** Transitions published by this node since it started (bench and tests). */
  get publishedCount(): number {
    return this.published;
  }

  /** Whether any stream of this node watches the workspace (or did, within WATCH_LINGER_MS). */
  watches(workspaceId: string): boolean {
    const entry = this.watched.get(workspaceId);
    if (!entry) return false;
    if (entry.listeners.size > 0 || entry.lingerUntil > this.now()) return true;
    this.watched.delete(workspaceId);
    return false;
  }

  /**
   * Called by an actor once a transition committed (never before: a stream must not show a state that
   * could still roll back). The row's last timeline entry is the transition.
   */
  publish(row: PublishedRow): void {
    if (!this.redis && !this.watches(row.workspaceId)) return;
    const seq = row.timeline.length - 1;
    const last = row.timeline[seq];
    if (!last) return;
    const event: LiveTransition = {
      workspaceId: row.workspaceId,
      generationId: row.id,
      seq,
      status: last.status,
      at: last.at,
      ...(last.detail !== undefined ? { detail: last.detail } : {}),
      mode: row.mode,
      project: row.project,
      terminal: TERMINAL.has(row.status),
      generation: this.present(row as never),
    };
    this.published++;
    if (!this.redis) {
      this.deliver(event);
      return;
    }
    this.redis.publish(this.channel, JSON.stringify(event)).catch((error: unknown) => {
      // The transition is committed: a stream that missed it finds it in the timeline when it resumes.
      this.logger.warn({ err: error, generationId: row.id }, 'could not publish a live transition');
    });
  }

  /** Test and bench hook: delivers an event to this node's listeners as if it had been published. */
  inject(event: LiveTransition): void {
    this.deliver(event);
  }

  private deliver(event: LiveTransition): void {
    const entry = this.watched.get(event.workspaceId);
    if (!entry) return;
    entry.ring.push(event);
    if (entry.ring.length > WINDOW_EVENTS) {
      entry.ring.shift();
      entry.start++;
    }
    for (const listener of entry.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.logger.error({ err: error }, 'a live-event listener failed');
      }
    }
  }

  /** Starts watching a workspace; the returned function stops (the window is kept WATCH_LINGER_MS more). */
  listen(workspaceId: string, listener: LiveListener): () => void {
    let entry = this.watched.get(workspaceId);
    if (!entry) {
      entry = { listeners: new Set(), ring: [], start: 0, lingerUntil: 0 };
      this.watched.set(workspaceId, entry);
    }
    entry.listeners.add(listener);
    const watched = entry;
    return () => {
      watched.listeners.delete(listener);
      if (watched.listeners.size === 0) watched.lingerUntil = this.now() + WATCH_LINGER_MS;
    };
  }

  /**
   * The events of the window after `lastEventId`, oldest first; undefined when that id is not in this
   * node's window (too old, or this node did not watch the workspace then): the client must read again.
   */
  since(workspaceId: string, lastEventId: string): LiveTransition[] | undefined {
    const ring = this.watched.get(workspaceId)?.ring;
    if (!ring) return undefined;
    for (let i = ring.length - 1; i >= 0; i--) {
      if (eventIdOf(ring[i]!) === lastEventId) return ring.slice(i + 1);
    }
    return undefined;
  }

  async close(): Promise<void> {
    for (const entry of this.watched.values()) entry.listeners.clear();
    this.watched.clear();
    if (this.subscriber) await closeRedis(this.subscriber);
  }
}

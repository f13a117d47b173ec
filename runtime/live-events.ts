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

/**
 * A piece of a generation's text answer as its provider streamed it (docs/streaming.md, `output`): not a
 * transition, not durable. `index` counts the job's pieces from 0; the pieces joined are its `textOutput`.
 */
export interface LiveOutput {
  kind: 'output';
  workspaceId: string;
  generationId: string;
  index: number;
  delta: string;
}

export type LiveEvent = LiveTransition | LiveOutput;

export function isLiveOutput(event: LiveEvent): event is LiveOutput {
  return (event as LiveOutput).kind === 'output';
}

export type LiveListener = (event: LiveEvent) => void;

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

/** Pieces of one generation's answer kept on a node for resumption while it runs (the rest is in its textOutput once it ends). */
export const WINDOW_OUTPUTS = 100_000;
/** Running generations whose pieces a node keeps at once. */
const MAX_GENERATIONS_WITH_OUTPUTS = 10_000;

interface Outputs {
  workspaceId: string;
  /** The pieces heard, from index `start`. */
  deltas: string[];
  start: number;
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
  /** Listeners of one generation on this node (the OpenAI-compatible door), fed in process by this node's actors. */
  private readonly followers = new Map<string, Set<LiveListener>>();
  /** The streamed pieces of the running generations of watched workspaces (GET /v1/generations/:id/stream). */
  private readonly outputs = new Map<string, Outputs>();
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
        let event: LiveEvent;
        try {
          event = JSON.parse(message) as LiveEvent;
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
    const followers = this.followers.get(row.id);
    if (!this.redis && !followers && !this.watches(row.workspaceId)) return;
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
    if (followers) this.tell(followers, event);
    if (!this.redis) {
      if (this.watches(row.workspaceId)) this.deliver(event);
      return;
    }
    this.redis.publish(this.channel, JSON.stringify(event)).catch((error: unknown) => {
      // The transition is committed: a stream that missed it finds it in the timeline when it resumes.
      this.logger.warn({ err: error, generationId: row.id }, 'could not publish a live transition');
    });
  }

  /**
   * A piece of a running generation's answer, as its provider streamed it: to this node's followers of the
   * generation at once, and to the streams of its workspace (through Redis when there is one). Unwatched,
   * it costs two map lookups.
   */
  publishOutput(output: Omit<LiveOutput, 'kind'>): void {
    const followers = this.followers.get(output.generationId);
    if (!followers && !this.redis && !this.watches(output.workspaceId)) return;
    const event: LiveOutput = { kind: 'output', ...output };
    if (followers) this.tell(followers, event);
    if (!this.redis) {
      if (this.watches(output.workspaceId)) this.deliver(event);
      return;
    }
    this.redis.publish(this.channel, JSON.stringify(event)).catch((error: unknown) => {
      this.logger.warn({ err: error, generationId: output.generationId }, 'could not publish a streamed output');
    });
  }

  /**
   * Listens to one generation's transitions and streamed pieces as this node's actors publish them, in
   * process (the job runs on the node that holds its workspace, where the request that made it is served).
   */
  follow(generationId: string, listener: LiveListener): () => void {
    let listeners = this.followers.get(generationId);
    if (!listeners) {
      listeners = new Set();
      this.followers.set(generationId, listeners);
    }
    listeners.add(listener);
    const set = listeners;
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.followers.get(generationId) === set) this.followers.delete(generationId);
    };
  }

  /** The pieces of a generation's answer this node heard after index `after` (all with -1), oldest first. */
  outputsOf(generationId: string, after: number): Array<{ index: number; delta: string }> {
    const kept = this.outputs.get(generationId);
    if (!kept) return [];
    const from = Math.max(0, after + 1 - kept.start);
    return kept.deltas.slice(from).map((delta, i) => ({ index: kept.start + from + i, delta }));
  }

  private tell(listeners: Set<LiveListener>, event: LiveEvent): void {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (error) {
        this.logger.error({ err: error }, 'a live-event listener failed');
      }
    }
  }

  /** Test and bench hook: delivers an event to this node's listeners as if it had been published. */
  inject(event: LiveTransition): void {
    this.deliver(event);
  }

  private deliver(event: LiveEvent): void {
    const entry = this.watched.get(event.workspaceId);
    if (!entry) {
      if (!isLiveOutput(event) && event.terminal) this.outputs.delete(event.generationId);
      return;
    }
    if (isLiveOutput(event)) {
      this.keepOutput(event);
      this.tell(entry.listeners, event);
      return;
    }
    // Once it ended, its answer is in its row: the pieces kept for resumption go.
    if (event.terminal) this.outputs.delete(event.generationId);
    entry.ring.push(event);
    if (entry.ring.length > WINDOW_EVENTS) {
      entry.ring.shift();
      entry.start++;
    }
    this.tell(entry.listeners, event);
  }

  private keepOutput(event: LiveOutput): void {
    let kept = this.outputs.get(event.generationId);
    if (!kept) {
      kept = { workspaceId: event.workspaceId, deltas: [], start: event.index };
      this.outputs.set(event.generationId, kept);
      // A job whose end this node never heard (its node stopped) is not kept for ever: the oldest goes first.
      if (this.outputs.size > MAX_GENERATIONS_WITH_OUTPUTS) this.outputs.delete(this.outputs.keys().next().value!);
    }
    // Pieces arrive in order from one publisher; one already kept (a repeat) is not kept twice.
    if (event.index < kept.start + kept.deltas.length) return;
    kept.deltas.push(event.delta);
    if (kept.deltas.length > WINDOW_OUTPUTS) {
      kept.deltas.shift();
      kept.start++;
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
    this.followers.clear();
    this.outputs.clear();
    if (this.subscriber) await closeRedis(this.subscriber);
  }
}

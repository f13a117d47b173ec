import nact, { type Ref } from 'nact';
import { SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import type { ActorBehavior, ActorContext, Piped } from './actor-behavior.ts';
import type { ActorMessenger, MessageOf, Protocol, ProtocolMap, ReplyTo, UntypedMessage } from './actor-protocol.ts';
import type { Clock, Timer } from './clock.ts';
import type { Logger } from './logger.ts';
import { inRequestScopeOf, traceContextOf, wrap, type Envelope, type Reply } from './envelope.ts';
import { runInRequest } from './request-scope.ts';
import type { Database } from '../persistence/database.ts';
import { WriterClosedError, type GroupCommitWriter } from '../persistence/group-commit.ts';
import { availabilityOf, DatabaseUnavailableError, isDatabaseUnreachable, untilReachable } from '../persistence/availability.ts';
import type { Lease } from '../persistence/cluster/leases.ts';
import { isFencedOut } from '../persistence/cluster/fence.ts';
import { withWriteClaim } from '../persistence/write-claims.ts';
import type { ActorMetrics } from './metrics/actors.ts';

/** Cluster mode: which workspaces this node runs, and the lease their actors' writes carry. */
export interface ActorOwnership {
  /** The lease of the workspace's shard if this node holds it now; undefined otherwise. */
  claimFor(workspaceId: string): Lease | undefined;
}

export interface DirectoryDeps<D = unknown> {
  clock: Clock;
  logger: Logger;
  db: Database;
  writer: GroupCommitWriter;
  tracer: Tracer;
  /** An actor with nothing to do for this long is stopped; the next message spawns it again. */
  idleMs: number;
  askTimeoutMs?: number;
  /** Handed to every actor as ctx.deps. */
  actorDeps?: D;
  /** Whether spans are recorded (an exporter is configured); without, messages carry no trace context and make no span. */
  tracing?: boolean;
  /** Cluster mode only: an actor runs only while this node owns its workspace's shard. */
  ownership?: ActorOwnership;
  /** Messages and processing time by kind, passivations; live actors and mailbox depth read through census(). */
  metrics?: ActorMetrics;
}

interface Entry {
  ref: Ref<Envelope<UntypedMessage>>;
  kind: string;
  id: string;
  pending: number;
  lastActive: number;
  passivate: boolean;
  /** A deferred write failed: the in-memory state may be ahead of the database, so reload it. */
  stale: boolean;
  /** The behaviour's keepAlive after the last message. */
  keepAlive: boolean;
  /** Replies waiting for their writes to commit (the writer keeps trying while the database is unreachable). */
  durable: number;
  /** Called when `durable` drops to 0. */
  durableWaiters: Array<() => void>;
  /** Called once when `pending` drops to 0 or the actor stops (a drain before a shard is handed over). */
  idleWaiters: Array<() => void>;
  /** Cluster mode: the actor's workspace once known (kind ws: its id; others: from their loaded state). */
  workspace?: string;
  /** Cluster mode: the lease under which it started; its writes carry it. */
  claim?: Lease;
}

/** A behaviour as the directory runs it: what its mailbox holds is its own kind's message, whatever its protocol. */
type AnyBehavior<C> = ActorBehavior<unknown, Protocol, C>;

/** State kept by nact for one live actor: its behaviour's state once loaded. */
type Slot = { loaded: true; state: unknown } | undefined;

/**
 * nact accepts only `[a-z0-9-$_.+!*'(),]+` as an actor name, so `kind:id` cannot be one. The actor lives
 * under its kind's supervisor, so its name is the id alone, with every other character written as `$`
 * and four hex digits (its UTF-16 code unit): one name per id, never one that nact refuses.
 */
function actorName(id: string): string {
  return id === '' ? '$' : id.replace(/[^A-Za-z0-9_.-]/g, (c) => `$${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export class ActorCrashedError extends Error {
  constructor(
    readonly key: string,
    cause: string,
  ) {
    super(`actor ${key} crashed: ${cause}`);
    this.name = 'ActorCrashedError';
  }
}

/** Cluster mode: the actor's workspace belongs to a shard this node does not own (any more). */
export class ShardNotOwnedError extends Error {
  constructor(readonly key: string) {
    super(`actor ${key} runs on another node: this node does not own its workspace's shard`);
    this.name = 'ShardNotOwnedError';
  }
}

export class DirectoryStoppedError extends Error {
  constructor() {
    super('the actor system is shutting down');
    this.name = 'DirectoryStoppedError';
  }
}

/**
 * The nact system with one supervisor per actor kind and a directory of live actors by kind and id.
 * It spawns on first message, never holds two live actors for one id, restarts a crashed actor from
 * its persisted state without touching its siblings, and stops idle ones. `K` are its kinds and their
 * protocols; `D` what its actors get as ctx.deps.
 */
export class ActorDirectory<K extends ProtocolMap = ProtocolMap, D = unknown> implements ActorMessenger<K> {
  private readonly system = nact.start();
  private readonly behaviors = new Map<string, AnyBehavior<ActorContext<D, K>>>();
  private readonly supervisors = new Map<string, Ref<unknown>>();
  private readonly live = new Map<string, Entry>();
  private totalPending = 0;
  private drainWaiters: Array<() => void> = [];
  private sweepTimer: Timer | undefined;
  private stopped = false;
  readonly stats = { spawned: 0, restarts: 0, passivated: 0, messages: 0 };

  private readonly tracing: boolean;

  constructor(private readonly deps: DirectoryDeps<D>) {
    this.tracing = deps.tracing ?? true;
    this.scheduleSweep();
    deps.metrics?.observe(this);
  }

  /** What actors get as ctx.deps; given once the service has built it (before any actor spawns). */
  provideDeps(actorDeps: D): void {
    this.deps.actorDeps = actorDeps;
  }

  /** Each kind's behaviour is typed with its protocol where it is declared (actors/kinds.ts, KindBehavior). */
  register<S, P extends Protocol>(behavior: ActorBehavior<S, P, ActorContext<D, K>>): void {
    if (this.behaviors.has(behavior.kind)) throw new Error(`actor kind ${behavior.kind} is already registered`);
    this.behaviors.set(behavior.kind, behavior as unknown as AnyBehavior<ActorContext<D, K>>);
    this.supervisors.set(
      behavior.kind,
      nact.spawn(this.system, (state: unknown) => state, behavior.kind),
    );
  }

  async ask<Kind extends keyof K & string, T extends MessageOf<K[Kind]>['type']>(
    kind: Kind,
    id: string,
    msg: MessageOf<K[Kind]> & { type: T },
    timeoutMs = this.deps.askTimeoutMs ?? 30_000,
  ): Promise<ReplyTo<K[Kind], T>> {
    const entry = this.enter(kind, id);
    const reply = (await nact.query(entry.ref, (replyTo: Ref<Reply<unknown>>) => wrap(msg, replyTo, this.tracing), timeoutMs)) as Reply<ReplyTo<K[Kind], T>>;
    if (reply.ok) return reply.value;
    if (reply.reason === 'not_owned') throw new ShardNotOwnedError(`${kind}:${id}`);
    const crashed = new ActorCrashedError(`${kind}:${id}`, reply.error);
    throw reply.reason === 'unavailable' ? new DatabaseUnavailableError(crashed) : crashed;
  }

  /**
   * Fire and forget. After stop() the message is dropped, not thrown: late timers and provider callbacks
   * have no caller to tell, and what they would have done is resumed from the database at the next start.
   */
  tell<Kind extends keyof K & string>(kind: Kind, id: string, msg: MessageOf<K[Kind]>): void {
    if (this.stopped) {
      this.deps.logger.debug({ actor: `${kind}:${id}` }, 'message dropped: the actor system has stopped');
      return;
    }
    nact.dispatch(this.enter(kind, id).ref, wrap(msg, undefined, this.tracing));
  }

  /** Ids of the live actors of one kind. */
  liveIds(kind: string): string[] {
    const ids: string[] = [];
    for (const entry of this.live.values()) if (entry.kind === kind) ids.push(entry.id);
    return ids;
  }

  isLive(kind: string, id: string): boolean {
    return this.live.has(`${kind}:${id}`);
  }

  liveCount(kind?: string): number {
    if (!kind) return this.live.size;
    let count = 0;
    for (const entry of this.live.values()) if (entry.kind === kind) count++;
    return count;
  }

  /** Live actors and the messages waiting for them or being handled, by kind (metrics). */
  census(): Map<string, { live: number; pending: number }> {
    const counts = new Map<string, { live: number; pending: number }>();
    for (const kind of this.behaviors.keys()) counts.set(kind, { live: 0, pending: 0 });
    for (const entry of this.live.values()) {
      const count = counts.get(entry.kind);
      if (!count) continue;
      count.live++;
      count.pending += entry.pending;
    }
    return counts;
  }

  /** Resolves when every mailbox is empty and no message is being handled. */
  drain(): Promise<void> {
    if (this.totalPending === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /**
   * Cluster mode: stops the actors whose workspace matches (a shard lost or handed over); with `drainMs`,
   * first waits (at most that long) for their mailboxes to empty. An actor still busy then stops once its
   * mailbox is empty (the messages left are refused: its shard is no longer owned). Returns how many.
   */
  async retireWorkspaces(matches: (workspaceId: string) => boolean, drainMs = 0): Promise<number> {
    const selected = () => [...this.live.values()].filter((entry) => entry.workspace !== undefined && matches(entry.workspace));
    const deadline = this.deps.clock.now() + drainMs;
    // Woken as the mailboxes empty, not polled; an actor spawned for these workspaces meanwhile is waited for too.
    for (let busy = selected().filter((entry) => entry.pending > 0); drainMs > 0 && busy.length > 0 && this.deps.clock.now() < deadline; ) {
      if (!(await this.idleWithin(busy, deadline - this.deps.clock.now()))) break;
      busy = selected().filter((entry) => entry.pending > 0);
    }
    const entries = selected();
    for (const entry of entries) {
      if (entry.pending === 0) this.retire(entry);
      else entry.passivate = true;
    }
    return entries.length;
  }

  /** Resolves true once every one of these actors has an empty mailbox (or was stopped), false after ms on the clock. */
  private idleWithin(entries: Entry[], ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      let busy = entries.length;
      const timer = this.deps.clock.setTimer(() => resolve(false), ms);
      const idle = () => {
        if (--busy > 0) return;
        timer.cancel();
        resolve(true);
      };
      for (const entry of entries) entry.idleWaiters.push(idle);
    });
  }

  /** Stops every actor idle for at least idleMs; returns how many were stopped. */
  passivateIdle(): number {
    const now = this.deps.clock.now();
    let count = 0;
    for (const entry of [...this.live.values()]) {
      // An actor whose writes are still to commit stays: spawned again, it would load a state without them.
      if (entry.pending === 0 && !entry.keepAlive && entry.durable === 0 && now - entry.lastActive >= this.deps.idleMs) {
        this.retire(entry);
        count++;
      }
    }
    return count;
  }

  /** Refuses new messages, waits for the mailboxes to empty, then stops every actor. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.sweepTimer?.cancel();
    await this.drain();
    for (const entry of [...this.live.values()]) this.retire(entry);
    nact.stop(this.system);
  }

  private enter(kind: string, id: string): Entry {
    if (this.stopped) throw new DirectoryStoppedError();
    const key = `${kind}:${id}`;
    let entry = this.live.get(key);
    if (!entry) {
      entry = this.spawn(kind, id, key);
      this.live.set(key, entry);
    }
    entry.pending++;
    this.totalPending++;
    entry.lastActive = this.deps.clock.now();
    return entry;
  }

  private spawn(kind: string, id: string, key: string): Entry {
    const behavior = this.behaviors.get(kind);
    const supervisor = this.supervisors.get(kind);
    if (!behavior || !supervisor) throw new Error(`unknown actor kind ${kind}`);
    const parentLogger = this.deps.logger;
    let logger: Logger | undefined;
    const ctx: ActorContext<D, K> = {
      kind,
      id,
      clock: this.deps.clock,
      // Made on first use: most actors (a job's) never log, and a pino child costs its bindings' serialisation.
      get logger() {
        logger ??= parentLogger.child({ actor: key });
        return logger;
      },
      db: this.deps.db,
      writer: this.deps.writer,
      actors: this,
      deps: this.deps.actorDeps as D,
      pipeToSelf: (work, toMessage) => this.pipe(entry, work, toMessage),
    };
    const entry: Entry = {
      ref: undefined as unknown as Ref<Envelope<UntypedMessage>>,
      kind,
      id,
      pending: 0,
      lastActive: this.deps.clock.now(),
      passivate: false,
      stale: false,
      keepAlive: false,
      durable: 0,
      durableWaiters: [],
      idleWaiters: [],
      workspace: kind === 'ws' ? id : undefined,
    };
    const ownership = this.deps.ownership;
    const handle = async (slot: Slot, envelope: Envelope<UntypedMessage>): Promise<Slot> => {
      let state: unknown;
      if (slot && !entry.stale) {
        state = slot.state;
      } else {
        // A state reloaded (after a crash or a failed write) must include the actor's own writes still on
        // their way to the database: they are waited for first.
        if (entry.durable > 0) await new Promise<void>((resolve) => entry.durableWaiters.push(resolve));
        // A load that finds the database unreachable waits for it: the message (perhaps a provider's
        // one-time report) is handled once the database is back, not lost with a crash.
        state =
          (!slot && !entry.stale ? behavior.seed?.(envelope.msg, ctx) : undefined) ??
          (await untilReachable(
            this.deps.db,
            () => behavior.load(ctx),
            () => this.stopped,
          ));
        entry.stale = false;
      }
      let claim: Lease | undefined;
      if (ownership) {
        entry.workspace ??= behavior.workspaceOf?.(state);
        if (entry.workspace !== undefined) {
          claim = ownership.claimFor(entry.workspace);
          if (!claim || (entry.claim !== undefined && entry.claim.epoch !== claim.epoch)) {
            // Another node runs this workspace (or this node lost it and took it back since): nothing here.
            entry.passivate = true;
            if (envelope.replyTo) nact.dispatch(envelope.replyTo, { ok: false, reason: 'not_owned', error: `${key} is not owned here` });
            else this.deps.logger.debug({ actor: key }, 'message dropped: the workspace is owned by another node');
            return undefined;
          }
          entry.claim = claim;
        }
      }
      const handler = behavior.handlers[envelope.msg.type];
      if (!handler) throw new Error(`actor kind ${behavior.kind} has no handler for a message of type ${envelope.msg.type}`);
      const outcome = claim ? await withWriteClaim(claim, () => handler(state, envelope.msg, ctx)) : await handler(state, envelope.msg, ctx);
      if (outcome.passivate) entry.passivate = true;
      entry.keepAlive = behavior.keepAlive?.(outcome.state) ?? false;
      const replyTo = envelope.replyTo;
      if (outcome.replyWhenDurable) {
        entry.durable++;
        outcome.replyWhenDurable.then(
          (value) => {
            this.durableDone(entry);
            if (replyTo) nact.dispatch(replyTo, { ok: true, value });
          },
          (error: unknown) => {
            entry.stale = true;
            this.durableDone(entry);
            this.deps.logger.error({ err: error, actor: key }, 'a deferred write failed; the actor reloads its persisted state');
            if (replyTo) nact.dispatch(replyTo, this.failure(error));
          },
        );
      } else if (replyTo) {
        nact.dispatch(replyTo, { ok: true, value: outcome.reply });
      }
      return { loaded: true as const, state: outcome.state };
    };
    const metrics = this.deps.metrics;
    const traced = async (slot: Slot, envelope: Envelope<UntypedMessage>): Promise<Slot> => {
      const parent = traceContextOf(envelope);
      const type = typeof envelope.msg === 'object' && envelope.msg !== null && 'type' in envelope.msg ? String(envelope.msg.type) : 'message';
      const span = this.deps.tracer.startSpan(
        `actor ${kind} ${type}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: { 'actor.kind': kind, 'actor.id': id, 'actor.message': type },
        },
        parent,
      );
      try {
        // The message's request and its span's context, entered as one scope.
        return await runInRequest(envelope.requestId, () => handle(slot, envelope), undefined, trace.setSpan(parent, span));
      } catch (error) {
        span.recordException(error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw error;
      } finally {
        span.end();
      }
    };
    // One async frame per message, its time measured in it (a second frame around it cost each message a
    // promise and its async-context slot: docs/performance.md, what a job allocates).
    const receive = async (slot: Slot, envelope: Envelope<UntypedMessage>): Promise<Slot> => {
      this.stats.messages++;
      const started = metrics ? performance.now() : 0;
      try {
        return this.tracing ? await traced(slot, envelope) : await inRequestScopeOf(envelope, () => handle(slot, envelope));
      } finally {
        this.done(entry);
        metrics?.message(kind, (performance.now() - started) / 1000);
      }
    };
    entry.ref = nact.spawn(supervisor, receive, actorName(id), {
      onCrash: (envelope: Envelope<UntypedMessage> | undefined, error: Error | undefined, sctx) => {
        this.stats.restarts++;
        this.deps.logger.error({ err: error, actor: key }, 'actor crashed; restarting it from its persisted state');
        if (envelope?.replyTo) nact.dispatch(envelope.replyTo, this.failure(error));
        return sctx.reset;
      },
    }) as Ref<Envelope<UntypedMessage>>;
    this.stats.spawned++;
    return entry;
  }

  /**
   * The error reply for a message that failed: marked `unavailable` (and the database marked down) when the
   * database could not be reached, or the writer has closed (the service is stopping); refused as not owned
   * when its write was fenced out (answered 503 with Retry-After, as any request for a shard in transit).
   */
  private failure(error: unknown): Reply<unknown> {
    // Cluster mode: the shard moved on before the write committed; the caller retries on its new owner.
    if (isFencedOut(error)) return { ok: false, reason: 'not_owned', error: (error as Error).message };
    const unavailable = isDatabaseUnreachable(error) || error instanceof DatabaseUnavailableError || error instanceof WriterClosedError;
    if (!unavailable) return { ok: false, reason: 'crashed', error: (error as Error | undefined)?.message ?? 'crash' };
    if (isDatabaseUnreachable(error)) availabilityOf(this.deps.db).down(error);
    return { ok: false, reason: 'unavailable', error: (error as Error).message };
  }

  private durableDone(entry: Entry): void {
    entry.durable--;
    if (entry.durable > 0 || entry.durableWaiters.length === 0) return;
    const waiters = entry.durableWaiters;
    entry.durableWaiters = [];
    for (const wake of waiters) wake();
  }

  /**
   * Counts the work as the actor's own pending message from now (see ActorContext.pipeToSelf), and hands
   * the message made of its outcome to the actor's mailbox, where handling it ends that count.
   */
  private pipe<T>(entry: Entry, work: Promise<T>, toMessage: (outcome: Piped<T>) => UntypedMessage): void {
    entry.pending++;
    this.totalPending++;
    work
      .then(
        (value): Piped<T> => ({ ok: true, value }),
        (error: unknown): Piped<T> => ({ ok: false, error }),
      )
      .then((outcome) => {
        let msg: UntypedMessage;
        try {
          msg = toMessage(outcome);
        } catch (error) {
          this.deps.logger.error({ err: error, actor: `${entry.kind}:${entry.id}` }, 'the outcome of work beside the mailbox could not be made a message');
          this.done(entry);
          return;
        }
        nact.dispatch(entry.ref, wrap(msg, undefined, this.tracing));
      });
  }

  private done(entry: Entry): void {
    entry.pending--;
    this.totalPending--;
    entry.lastActive = this.deps.clock.now();
    if (entry.pending === 0 && entry.passivate) this.retire(entry);
    if (entry.pending === 0) this.wakeIdle(entry);
    if (this.totalPending === 0 && this.drainWaiters.length > 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  private retire(entry: Entry): void {
    const key = `${entry.kind}:${entry.id}`;
    if (this.live.get(key) !== entry) return;
    this.live.delete(key);
    this.wakeIdle(entry);
    this.stats.passivated++;
    this.deps.metrics?.passivated(entry.kind);
    nact.stop(entry.ref);
  }

  private wakeIdle(entry: Entry): void {
    if (entry.idleWaiters.length === 0) return;
    const waiters = entry.idleWaiters;
    entry.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  private scheduleSweep(): void {
    this.sweepTimer = this.deps.clock.setTimer(
      () => {
        this.passivateIdle();
        if (!this.stopped) this.scheduleSweep();
      },
      Math.max(10, Math.floor(this.deps.idleMs / 2)),
    );
  }
}

import type { Clock } from './clock.ts';
import type { Logger } from './logger.ts';
import type { Database } from '../persistence/database.ts';
import type { SnapshotWriter } from '../persistence/snapshot-writer.ts';

/** What an actor may use: its identity, time, persistence and the other actors. */
export interface ActorContext {
  kind: string;
  id: string;
  clock: Clock;
  logger: Logger;
  db: Database;
  writer: SnapshotWriter;
  actors: ActorMessenger;
}

export interface ActorMessenger {
  ask<R>(kind: string, id: string, msg: unknown, timeoutMs?: number): Promise<R>;
  tell(kind: string, id: string, msg: unknown): void;
}

export interface Outcome<S, R> {
  state: S;
  reply?: R;
  /** Stop this actor once its mailbox is empty (for example, a terminal generation). */
  passivate?: boolean;
}

/**
 * One kind of actor. `load` rebuilds its state from what was persisted: on the first message after
 * spawning and after every crash. `receive` handles one message at a time; persisting through the
 * writer before replying is what makes a reply durable. A throw crashes only this actor.
 */
export interface ActorBehavior<S, M, R = unknown> {
  kind: string;
  load(ctx: ActorContext): Promise<S>;
  receive(state: S, msg: M, ctx: ActorContext): Promise<Outcome<S, R>>;
}

import type { Clock } from './clock.ts';
import type { Logger } from './logger.ts';
import type { Database } from '../persistence/database.ts';
import type { GroupCommitWriter } from '../persistence/group-commit.ts';
import type { ActorMessenger, AnyReplyOf, MessageOf, Protocol, ProtocolMap } from './actor-protocol.ts';

/**
 * What an actor may use: its identity, time, persistence, the other actors (of the kinds `K`) and what the
 * service gives its actors beyond the runtime (`D`: catalog, providers, blob store…).
 */
export interface ActorContext<D = unknown, K extends ProtocolMap = ProtocolMap> {
  kind: string;
  id: string;
  clock: Clock;
  logger: Logger;
  db: Database;
  writer: GroupCommitWriter;
  actors: ActorMessenger<K>;
  deps: D;
}

export interface Outcome<S, R> {
  state: S;
  reply?: R;
  /**
   * A reply that is ready only once its writes commit. The actor goes on with its next message at once
   * (its in-memory state already includes the change), so one actor's writes share group commits; if the
   * promise rejects, the caller gets the error and the actor reloads its persisted state before its next
   * message. Writes must then be deltas, each correct on its own whatever commits around it.
   */
  replyWhenDurable?: Promise<R>;
  /** Stop this actor once its mailbox is empty (for example, a terminal generation). */
  passivate?: boolean;
}

/**
 * One kind of actor, speaking protocol `P`. `load` rebuilds its state from what was persisted: on the first
 * message after spawning and after every crash. `receive` handles one message at a time and answers one of
 * the protocol's replies; persisting through the writer before replying is what makes a reply durable. A
 * throw crashes only this actor. `C` is the context the directory hands it.
 */
export interface ActorBehavior<S, P extends Protocol = Protocol, C = ActorContext> {
  kind: string;
  load(ctx: C): Promise<S>;
  receive(state: S, msg: MessageOf<P>, ctx: C): Promise<Outcome<S, AnyReplyOf<P>>>;
  /**
   * The state carried by the message that spawns the actor, if it carries one (the writer of a row it
   * just committed hands it over, or a reader of many actors' rows hands each its own), in place of `load`.
   * Never used after a crash or a failed write.
   */
  seed?(msg: MessageOf<P>, ctx: C): S | undefined;
  /**
   * The workspace the actor belongs to, from its state (cluster mode: its shard decides which node runs
   * it). Kind `ws` is the workspace itself and needs none; undefined when the state names none (no such row).
   */
  workspaceOf?(state: S): string | undefined;
  /** While true (for example, jobs are queued), the idle sweep leaves the actor alone. */
  keepAlive?(state: S): boolean;
}

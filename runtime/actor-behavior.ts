import type { Clock } from './clock.ts';
import type { Logger } from './logger.ts';
import type { Database } from '../persistence/database.ts';
import type { GroupCommitWriter } from '../persistence/group-commit.ts';
import type { ActorMessenger, MessageOf, NoReply, Protocol, ProtocolMap, ReplyTo, UntypedMessage } from './actor-protocol.ts';

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
  /**
   * Work beside the mailbox (a call over the network): the actor goes on with its next messages while it
   * runs, and its outcome comes back to this actor as the message `toMessage` makes of it, as Akka's
   * pipeToSelf does. Until that message is handled the actor counts as busy: a drain before its shard is
   * handed over, or a stop, waits for it, and it is never passivated meanwhile.
   */
  pipeToSelf<T>(work: Promise<T>, toMessage: (outcome: Piped<T>) => UntypedMessage): void;
}

/** What work piped to an actor ended with. */
export type Piped<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * What a handler gives back: the actor's next state, and the message's answer. A message whose reply is
 * NoReply answers nothing; any other answers its reply at once (`reply`) or once its writes commit
 * (`replyWhenDurable`: the actor goes on with its next message meanwhile, its in-memory state already
 * including the change, so one actor's writes share group commits; if the promise rejects, the caller gets
 * the error and the actor reloads its persisted state before its next message, so writes must be deltas,
 * each correct on its own whatever commits around it). A message that answers nothing may still hand its
 * writes' promise as `replyWhenDurable`, so that a failed write reloads the actor. Leaving an answer out, or
 * answering another type, does not compile.
 */
export type Outcome<S, R> = {
  state: S;
  /** Stop this actor once its mailbox is empty (for example, a terminal generation). */
  passivate?: boolean;
} & ([R] extends [NoReply]
  ? { reply?: undefined; replyWhenDurable?: Promise<NoReply> }
  : { reply: R; replyWhenDurable?: undefined } | { reply?: undefined; replyWhenDurable: Promise<R> });

/** The handler of messages of type `T`: it sees that message's fields and answers that message's reply. */
export type Handler<S, P extends Protocol, T extends string, C> = (
  state: S,
  msg: Extract<MessageOf<P>, { type: T }>,
  ctx: C,
) => Outcome<S, ReplyTo<P, T>> | Promise<Outcome<S, ReplyTo<P, T>>>;

/** An actor's handler table: one handler per message type of its protocol, none missing, none extra. */
export type Handlers<S, P extends Protocol, C> = { [T in MessageOf<P>['type']]: Handler<S, P, T, C> };

/**
 * One kind of actor, speaking protocol `P`. `load` rebuilds its state from what was persisted: on the first
 * message after spawning and after every crash. `handlers` is its table: the handler of a message's type
 * handles it, one message at a time, and answers that type's reply; persisting through the writer before
 * replying is what makes a reply durable. A throw crashes only this actor. `C` is the context the directory
 * hands it.
 */
export interface ActorBehavior<S, P extends Protocol = Protocol, C = ActorContext> {
  kind: string;
  load(ctx: C): Promise<S>;
  handlers: Handlers<S, P, C>;
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

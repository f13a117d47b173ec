/**
 * One actor kind's protocol: its messages, a union discriminated by `type`, and for each type the reply it
 * answers (NoReply for a message that is only ever told: a timer, a wake-up). A protocol that leaves a type
 * without its reply does not compile.
 */
export interface Protocol<M extends { type: string } = UntypedMessage, R extends { [T in M['type']]: unknown } = { [T in M['type']]: unknown }> {
  message: M;
  replies: R;
}

/** The reply of a message that answers nothing (one only ever told, or asked only to wait for it). */
export type NoReply = undefined;

/** The message of a kind declared without a protocol (tests' own kinds): any `type`, any fields, any reply. */
export type UntypedMessage = { type: string; [field: string]: unknown };

/** The kinds of a directory, each with its protocol: `{ ws: WorkspaceProtocol, gen: … }`. */
export type ProtocolMap = { [kind: string]: Protocol };

export type MessageOf<P extends Protocol> = P['message'];

/** The reply to a message of type `T`. */
export type ReplyTo<P extends Protocol, T extends string> = P['replies'][T];

/** Any reply of the protocol: what a behaviour's `receive` may answer. */
export type AnyReplyOf<P extends Protocol> = P['replies'][P['message']['type']];

/**
 * Messages to the actors of the kinds in `K`. A message is one of its kind's union, checked field by field,
 * and `ask` answers the reply its message's type declares: the caller does not choose it.
 */
export interface ActorMessenger<K extends ProtocolMap = ProtocolMap> {
  ask<Kind extends keyof K & string, T extends MessageOf<K[Kind]>['type']>(
    kind: Kind,
    id: string,
    msg: MessageOf<K[Kind]> & { type: T },
    timeoutMs?: number,
  ): Promise<ReplyTo<K[Kind], T>>;
  tell<Kind extends keyof K & string>(kind: Kind, id: string, msg: MessageOf<K[Kind]>): void;
}

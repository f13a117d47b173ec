import { context, propagation, ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import type { Ref } from 'nact';
import { currentRequestId, runInRequest } from './request-scope.ts';

/**
 * The reply an asking caller receives: a value, or why there is none. `not_owned`: cluster mode, the actor's
 * workspace is on a shard this node does not hold (any more), or its write was fenced out; `unavailable`: the
 * database could not be reached (or the writer has closed); `crashed`: the actor failed on the message.
 */
export type Reply<R> = { ok: true; value: R } | { ok: false; reason: FailureReason; error: string };

export type FailureReason = 'not_owned' | 'crashed' | 'unavailable';

/** What travels in an actor's mailbox: the message, the sender's trace context and where to reply. */
export interface Envelope<M> {
  msg: M;
  trace: Record<string, string>;
  replyTo?: Ref<Reply<unknown>>;
  /** The request the message was sent for (its log lines carry its id); none outside any request. */
  requestId?: string;
}

const NO_TRACE: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** `tracing` false (no span is recorded anywhere): the sender's trace context is not carried. */
export function wrap<M>(msg: M, replyTo?: Ref<Reply<unknown>>, tracing = true): Envelope<M> {
  let carrier = NO_TRACE;
  if (tracing) {
    carrier = {};
    propagation.inject(context.active(), carrier);
  }
  const envelope: Envelope<M> = replyTo ? { msg, trace: carrier, replyTo } : { msg, trace: carrier };
  const requestId = currentRequestId();
  if (requestId !== undefined) envelope.requestId = requestId;
  return envelope;
}

/**
 * Runs an actor's handling of one message in the request scope of that message: the scope the actor's
 * mailbox loop happens to run in is that of whichever message woke it, so without this a log line would
 * carry the id of another request (or of none, when it has one).
 */
export function inRequestScopeOf<T>(envelope: Envelope<unknown>, run: () => T): T {
  return runInRequest(envelope.requestId, run, undefined);
}

export function traceContextOf(envelope: Envelope<unknown>): Context {
  return propagation.extract(ROOT_CONTEXT, envelope.trace);
}

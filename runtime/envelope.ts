import { context, propagation, ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import type { Ref } from 'nact';

/**
 * The reply an asking caller receives: a value, or the news that the actor crashed on its message
 * (`unavailable` when it was because the database could not be reached).
 */
export type Reply<R> = { ok: true; value: R } | { ok: false; error: string; unavailable?: boolean };

/** What travels in an actor's mailbox: the message, the sender's trace context and where to reply. */
export interface Envelope<M> {
  msg: M;
  trace: Record<string, string>;
  replyTo?: Ref<Reply<unknown>>;
}

const NO_TRACE: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** `tracing` false (no span is recorded anywhere): the sender's trace context is not carried. */
export function wrap<M>(msg: M, replyTo?: Ref<Reply<unknown>>, tracing = true): Envelope<M> {
  let carrier = NO_TRACE;
  if (tracing) {
    carrier = {};
    propagation.inject(context.active(), carrier);
  }
  return replyTo ? { msg, trace: carrier, replyTo } : { msg, trace: carrier };
}

export function traceContextOf(envelope: Envelope<unknown>): Context {
  return propagation.extract(ROOT_CONTEXT, envelope.trace);
}
